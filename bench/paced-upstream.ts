import { spawn } from 'node:child_process';

/**
 * An OpenAI-shaped upstream in a process of its own (its CPU is not the reader's): a node:http server
 * on loopback that answers every POST with a chunked `text/event-stream` of `events` chunks of ~270
 * bytes, one every `gapMs` (one event per packet, as a model streams), then `data: [DONE]`.
 */
export async function startPacedUpstream(
  events: number,
  gapMs: number,
): Promise<{ port: number; stop(): void }> {
  const script = `
const http = require('node:http');
const event = (i) => 'data: ' + JSON.stringify({ id: 'chatcmpl-0123456789abcdef', object: 'chat.completion.chunk', created: 1767225600, model: 'sim-fast', system_fingerprint: 'fp_simulator', choices: [{ index: 0, delta: { content: ' word' + (i % 97) }, logprobs: null, finish_reason: null }] }) + '\\n\\n';
const server = http.createServer((req, res) => {
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
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve) =>
    child.stdout?.once('data', (line: Buffer) => resolve(Number(line.toString().trim()))),
  );
  return { port, stop: () => child.kill() };
}
