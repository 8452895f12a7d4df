import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { openWithFallback, readBody } from '../../../functions/adapters/upstream.js';
import { UpstreamError } from '../../../functions/core/errors.js';
import type { UpstreamTarget } from '../../../functions/core/tiers.js';

/**
 * The upstream call as it goes out on the wire (over the HTTP/1.1 exchange, functions/adapters/http1.ts),
 * against a raw TCP server on loopback that records the bytes it is sent.
 */
const servers: { server: Server; sockets: Socket[] }[] = [];
afterEach(async () => {
  for (const { server, sockets } of servers.splice(0)) {
    // The upstream's kept-alive sockets stay open on the client's side: close them from here.
    for (const socket of sockets) socket.destroy();
    await new Promise((done) => server.close(done));
  }
});

/** A server that records each request's bytes (up to its content-length body) and answers with `reply`. */
async function recording(reply: string) {
  const requests: string[] = [];
  const sockets: Socket[] = [];
  const server = createServer((socket) => {
    sockets.push(socket);
    let buffered = '';
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('latin1');
      const end = buffered.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = Number(/content-length: (\d+)/i.exec(buffered.slice(0, end))?.[1] ?? 0);
      if (buffered.length < end + 4 + length) return;
      requests.push(buffered.slice(0, end + 4 + length));
      buffered = '';
      socket.write(reply);
    });
    socket.on('error', () => {});
  });
  servers.push({ server, sockets });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return { port: (server.address() as AddressInfo).port, requests, sockets };
}

const REPLY_BODY = '{"id":"x","object":"chat.completion"}';
const REPLY = `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${REPLY_BODY.length}\r\n\r\n${REPLY_BODY}`;

function call(baseUrl: string, apiKey: string | undefined, failures: string[] = []) {
  const target = { baseUrl, model: 'm', credential: 'KEY' } as UpstreamTarget;
  return openWithFallback({
    targets: [target],
    bodyFor: () => ({ model: 'm', messages: [{ role: 'user', content: 'é' }] }),
    credential: async () => apiKey,
    policy: { attemptsPerTarget: 2, baseDelayMs: 1, maxDelayMs: 5, firstByteTimeoutMs: 2_000 },
    maxBytes: 1_000_000,
    deadline: Date.now() + 5_000,
    onAttemptFailed: ({ reason }) => failures.push(reason),
  });
}

describe('the upstream call on the wire', () => {
  it("POSTs the JSON to the base URL's chat completions path with its host, key and byte length", async () => {
    const server = await recording(REPLY);
    const opened = await call(`http://127.0.0.1:${server.port}/api/v1`, 'sk-test');
    if (opened.stream) throw new Error('a JSON call');
    expect(await readBody(opened.body)).toBe(REPLY_BODY);
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'é' }] });
    expect(Buffer.from(server.requests[0] ?? '', 'latin1').toString('utf8')).toBe(
      `POST /api/v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:${server.port}\r\n` +
        'content-type: application/json\r\naccept: application/json\r\nauthorization: Bearer sk-test\r\n' +
        `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    // A second call goes on the same kept-alive socket.
    const again = await call(`http://127.0.0.1:${server.port}/api/v1`, 'sk-test');
    if (!again.stream) await readBody(again.body);
    expect(server.sockets).toHaveLength(1);
  });

  it('sends no authorization header for a keyless upstream', async () => {
    const server = await recording(REPLY);
    const opened = await call(`http://127.0.0.1:${server.port}/v1`, undefined);
    if (!opened.stream) await readBody(opened.body);
    expect(server.requests[0]).not.toMatch(/authorization/i);
  });

  it('never sends a credential that would split the head (a pasted newline), and does not retry it', async () => {
    const server = await recording(REPLY);
    const failures: string[] = [];
    const error = await call(
      `http://127.0.0.1:${server.port}/v1`,
      'sk-test\r\nx-injected: 1',
      failures,
    ).catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(UpstreamError);
    expect(failures).toEqual(['the upstream credential has characters a header cannot carry']);
    expect(server.requests).toEqual([]);
  });
});
