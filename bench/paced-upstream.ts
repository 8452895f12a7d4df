import { spawn } from 'node:child_process';
import { Pool } from 'undici';
import { openStream, type UpstreamBody } from '../functions/adapters/upstream-body.js';

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
 * Opens streams from the paced upstream on `port` as the upstream call reads them (undici's `stream`
 * into an UpstreamBody, as functions/adapters/upstream.ts does, one kept-alive pool);
 * `onFirstPiece` runs as the body's first piece arrives (where a reader's CPU count starts).
 */
export function pacedBodies(port: number): (onFirstPiece?: () => void) => Promise<UpstreamBody> {
  const pool = new Pool(`http://127.0.0.1:${port}`, { connect: { timeout: 5_000 } });
  return async (onFirstPiece) => {
    const options = { path: '/', method: 'POST' as const, body: '{}', headersTimeout: 5_000, bodyTimeout: 0 };
    const { body } = await openStream(pool, options, 10_000_000);
    if (!onFirstPiece) return body;
    // The first piece's arrival, seen as the body takes it.
    const piece = body.piece.bind(body);
    body.piece = (bytes) => {
      body.piece = piece;
      onFirstPiece();
      piece(bytes);
    };
    return body;
  };
}
