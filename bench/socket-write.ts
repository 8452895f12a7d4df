/**
 * `npx tsx bench/socket-write.ts`: what one write of a request to a loopback peer costs the writer,
 * CPU (process.cpuUsage, which Linux counts from the scheduler's own runtime) against wall time, on
 * Node 22 when scripts/install-lambda-runtime.sh has installed it. The peer is a node:http server in
 * another process that answers each request; the writer sends one ~750-byte request every 10 ms (as
 * a function instance writes a DynamoDB call or its reply) and times the `socket.write` call alone,
 * which hands the bytes to the kernel synchronously. 400 writes after 50 unmeasured, three rounds.
 *
 * Why it exists: a V8 CPU profile of the completions function put 21-32% of its samples in socket
 * writes. V8's sampler runs on wall time, and on a 2-vCPU machine the peer a write wakes (DynamoDB
 * Local, the emulator) often takes the CPU before the writer returns: that wait lands on the write in
 * the profile. This measures what the write itself costs.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { connect } from 'node:net';
import { runOnNode22 } from './on-node22.js';

runOnNode22();

const PEER = `
const http = require('node:http');
const body = JSON.stringify({ Responses: { keys: [{ keyHash: { S: 'x'.repeat(64) } }] } });
const server = http.createServer((request, response) => {
  request.resume();
  request.on('end', () => response.writeHead(200, { 'content-length': Buffer.byteLength(body) }).end(body));
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
`;
const WRITES = 400;
const WARM = 50;

const peer: ChildProcess = spawn(process.execPath, ['-e', PEER], { stdio: ['ignore', 'pipe', 'inherit'] });
try {
  const port = await new Promise<number>((resolve) =>
    peer.stdout?.once('data', (data: Buffer) => resolve(Number(data.toString().trim()))),
  );
  const socket = connect(port, '127.0.0.1');
  socket.setNoDelay(true);
  await new Promise((resolve) => socket.once('connect', resolve));
  const body = JSON.stringify({
    RequestItems: { keys: { Keys: [{ keyHash: { S: 'k'.repeat(64) } }] } },
  }).padEnd(600, ' ');
  const request = `POST / HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/x-amz-json-1.0\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
  let answered: (() => void) | undefined;
  socket.on('data', () => answered?.());
  console.log(
    `Node ${process.version}; one ${request.length}-byte write every 10 ms to a node:http peer in another process.`,
  );
  for (let round = 1; round <= 3; round++) {
    let cpu = 0;
    let wall = 0;
    for (let i = 0; i < WARM + WRITES; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      const answer = new Promise<void>((resolve) => {
        answered = resolve;
      });
      const cpuBefore = process.cpuUsage();
      const wallBefore = performance.now();
      socket.write(request);
      const spentWall = performance.now() - wallBefore;
      const spentCpu = process.cpuUsage(cpuBefore);
      if (i >= WARM) {
        cpu += spentCpu.user + spentCpu.system;
        wall += spentWall * 1_000;
      }
      await answer;
    }
    console.log(
      `round ${round}: ${(cpu / WRITES).toFixed(0)} us of CPU a write, ${(wall / WRITES).toFixed(0)} us wall`,
    );
  }
  socket.destroy();
} finally {
  peer.kill();
}
