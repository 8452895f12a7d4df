import { createServer, type IncomingMessage } from 'node:http';
import { createSimulator, type SimulatorOptions } from './simulator.js';

/** The simulator over HTTP on 127.0.0.1: `url` is an OpenAI-style base URL (`.../v1`). */
export async function startSimulator(opts: SimulatorOptions & { port?: number; host?: string } = {}) {
  const simulator = createSimulator(opts.apiKey ? { apiKey: opts.apiKey } : {});
  const host = opts.host ?? '127.0.0.1';
  const server = createServer(async (req, res) => {
    const response = await simulator.handle({
      method: req.method ?? 'GET',
      path: new URL(req.url ?? '/', 'http://localhost').pathname,
      headers: req.headers as Record<string, string | undefined>,
      body: await readBody(req),
    });
    await sleep(response.headerDelayMs);
    res.writeHead(response.status, response.headers);
    res.flushHeaders();
    for (const piece of response.body) {
      if ('drop' in piece) {
        res.socket?.destroy();
        return;
      }
      await sleep(piece.delayMs ?? 0);
      if (res.destroyed) return;
      res.write(piece.text);
    }
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, host, resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://${host}:${port}/v1`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

function sleep(ms: number): Promise<void> {
  return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
}
