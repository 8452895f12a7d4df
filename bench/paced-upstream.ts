import { spawn } from 'node:child_process';
import { Http1Client } from '../functions/adapters/http1.js';
import { UpstreamBody } from '../functions/adapters/upstream-body.js';

/**
 * An OpenAI-shaped upstream in a process of its own (its CPU is not the reader's): a node:http server
 * on loopback (node:https with `tls`'s key and certificate) that answers every POST with a chunked
 * `text/event-stream` of `events` chunks of ~270 bytes, one every `gapMs` (one event per packet, as a
 * model streams), then `data: [DONE]`.
 */
export async function startPacedUpstream(
  events: number,
  gapMs: number,
  tls?: { key: string; cert: string },
): Promise<{ port: number; stop(): void }> {
  const script = `
const http = require(process.env.PACED_TLS ? 'node:https' : 'node:http');
const tls = process.env.PACED_TLS ? JSON.parse(process.env.PACED_TLS) : undefined;
const event = (i) => 'data: ' + JSON.stringify({ id: 'chatcmpl-0123456789abcdef', object: 'chat.completion.chunk', created: 1767225600, model: 'sim-fast', system_fingerprint: 'fp_simulator', choices: [{ index: 0, delta: { content: ' word' + (i % 97) }, logprobs: null, finish_reason: null }] }) + '\\n\\n';
const server = http.createServer(...(tls ? [tls] : []), (req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    let i = 0;
    const tick = () => {
      if (i === ${events}) { res.end('data: [DONE]\\n\\n'); return; }
      res.write(event(i++));
      setTimeout(tick, ${gapMs});
    };
    tick();
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
`;
  const child = spawn(process.execPath, ['-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...(tls ? { PACED_TLS: JSON.stringify(tls) } : {}) },
  });
  const port = await new Promise<number>((resolve) =>
    child.stdout?.once('data', (line: Buffer) => resolve(Number(line.toString().trim()))),
  );
  return { port, stop: () => child.kill() };
}

/**
 * Opens streams from the paced upstream on `port` as the upstream call reads them (over the HTTP/1.1
 * exchange, functions/adapters/http1.ts, one kept-alive socket), each body an UpstreamBody;
 * `onFirstPiece` runs as the body's first piece arrives (where a reader's CPU count starts).
 */
export function pacedBodies(port: number): (onFirstPiece?: () => void) => Promise<UpstreamBody> {
  const client = new Http1Client(
    { protocol: 'http:', hostname: '127.0.0.1', port },
    { connectTimeoutMs: 5_000, silenceMs: 0 },
  );
  const head = `POST / HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-length: 2\r\n\r\n`;
  return async (onFirstPiece) => {
    let body: UpstreamBody | undefined;
    await client.open(head, '{}', 5_000, (answer) => {
      const received = new UpstreamBody(10_000_000, answer.abort);
      body = received;
      if (!onFirstPiece) return received;
      const first = onFirstPiece;
      let seen = false;
      return {
        piece: (bytes) => {
          if (!seen) first();
          seen = true;
          received.piece(bytes);
        },
        end: () => received.end(),
        fail: (error) => received.fail(error),
      };
    });
    return body as UpstreamBody;
  };
}
