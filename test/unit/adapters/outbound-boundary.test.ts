import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DynamoWire } from '../../../functions/adapters/dynamodb/wire.js';
import { Origin } from '../../../functions/adapters/origin.js';
import { openWithFallback, readBody } from '../../../functions/adapters/upstream.js';
import type { UpstreamBody } from '../../../functions/adapters/upstream-body.js';
import type { UpstreamTarget } from '../../../functions/core/tiers.js';
import { selfSignedCertificate } from '../../support/certificate.js';

/**
 * The outbound calls (the upstream call and the direct DynamoDB calls, origin.ts) against raw TCP
 * and TLS servers on loopback that write exactly the bytes a hostile or broken peer would: a head
 * past its bound, a body whose framing breaks, bytes nobody asked for, a socket closed while idle, a
 * certificate for another name. What is pinned is what the adapters do, not how the HTTP client does it.
 */
const servers: { server: Server; sockets: Socket[] }[] = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const { server, sockets } of servers.splice(0)) {
    for (const socket of sockets) socket.destroy();
    await new Promise((done) => server.close(done));
  }
});

/** A server that calls `answer` with each complete request (head and content-length body) and its socket. */
async function fake(answer: (socket: Socket, n: number) => void, tls?: { key: string; cert: string }) {
  const sockets: Socket[] = [];
  let requests = 0;
  const onSocket = (socket: Socket) => {
    sockets.push(socket);
    let buffered = '';
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('latin1');
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) return;
        const length = Number(/content-length: (\d+)/i.exec(buffered.slice(0, end))?.[1] ?? 0);
        if (buffered.length < end + 4 + length) return;
        buffered = buffered.slice(end + 4 + length);
        requests += 1;
        answer(socket, requests);
      }
    });
    socket.on('error', () => {});
  };
  const server: Server = tls ? createTlsServer(tls, onSocket) : createServer(onSocket);
  servers.push({ server, sockets });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return { port: (server.address() as AddressInfo).port, sockets, requests: () => requests };
}

const OK = (body: string, extra = '') =>
  `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n${extra}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

/** A JSON upstream call to `port`; its body, or the reasons its attempts failed. */
async function upstream(port: number, failures: string[] = []): Promise<UpstreamBody> {
  const opened = await openWithFallback({
    targets: [{ baseUrl: `http://127.0.0.1:${port}/v1`, model: 'm' } as UpstreamTarget],
    bodyFor: () => ({ model: 'm', messages: [] }),
    credential: async () => 'sk-test',
    policy: { attemptsPerTarget: 2, baseDelayMs: 1, maxDelayMs: 5, firstByteTimeoutMs: 2_000 },
    maxBytes: 1_000_000,
    deadline: Date.now() + 10_000,
    onAttemptFailed: ({ reason }) => failures.push(reason),
  });
  if (opened.stream) throw new Error('a JSON call');
  return opened.body;
}

/** Every piece a body gives, then how it ended (`end` or the fault's message). */
async function drain(body: UpstreamBody): Promise<{ text: string; ending: string }> {
  let text = '';
  try {
    for (;;) {
      const piece = await body.read(5_000);
      if (piece === null) return { text, ending: 'end' };
      if (piece === 'timeout') return { text, ending: 'timeout' };
      text += piece.toString();
    }
  } catch (error) {
    return { text, ending: (error as Error).message };
  }
}

/** A loop turn: the socket is back in the pool once its answer has ended. */
const turn = () => new Promise((ready) => setImmediate(ready));

describe('an upstream that breaks HTTP/1.1', () => {
  it('a head past 64 KiB fails the attempt (each of its two), without waiting for more', async () => {
    const server = await fake((socket) =>
      socket.write(`HTTP/1.1 200 OK\r\nx-padding: ${'a'.repeat(70 * 1024)}\r\ncontent-length: 2\r\n\r\n{}`),
    );
    const failures: string[] = [];
    await expect(upstream(server.port, failures)).rejects.toThrow();
    expect(failures).toHaveLength(2);
    expect(failures[0]).toMatch(/^connection failed \(.*header/i);
  });

  it('a chunked body whose framing breaks: every byte before it, then the fault', async () => {
    const server = await fake((socket) =>
      socket.write(
        'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n' +
          '5\r\nfirst\r\n6\r\nsecond\r\nzz\r\nnot a chunk\r\n',
      ),
    );
    const { text, ending } = await drain(await upstream(server.port));
    expect(text).toBe('firstsecond');
    expect(ending).not.toBe('end');
  });

  it('bytes it sends when nothing was asked drop that socket; the next call is answered on a new one', async () => {
    const server = await fake((socket, n) => {
      socket.write(OK(`{"n":${n}}`));
      if (n === 1) setImmediate(() => socket.write('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n'));
    });
    expect(await readBody(await upstream(server.port))).toBe('{"n":1}');
    await vi.waitFor(() => expect(server.sockets[0]?.destroyed).toBe(true));
    expect(await readBody(await upstream(server.port))).toBe('{"n":2}');
    expect(server.sockets).toHaveLength(2);
  });
});

describe('keep-alive', () => {
  it('reuses a socket only after a complete answer: an abandoned body closes it', async () => {
    const server = await fake((socket, n) =>
      // The second answer never completes: its reader abandons it.
      n === 2 ? socket.write(OK('{"n":2}').slice(0, -3)) : socket.write(OK(`{"n":${n}}`)),
    );
    expect(await readBody(await upstream(server.port))).toBe('{"n":1}');
    await turn();
    const partial = await upstream(server.port);
    expect(server.sockets).toHaveLength(1);
    partial.cancel();
    await turn();
    const failures: string[] = [];
    expect(await readBody(await upstream(server.port, failures))).toBe('{"n":3}');
    expect(failures).toEqual([]);
    // The abandoned answer's socket was closed, not kept: the third answer came on another.
    await vi.waitFor(() => expect(server.sockets[0]?.destroyed).toBe(true));
    expect(server.sockets.length).toBeGreaterThan(1);
  });

  it('does not reuse a socket whose answer said Connection: close', async () => {
    const server = await fake((socket, n) => socket.write(OK(`{"n":${n}}`, 'connection: close\r\n')));
    expect(await readBody(await upstream(server.port))).toBe('{"n":1}');
    await turn();
    expect(await readBody(await upstream(server.port))).toBe('{"n":2}');
    expect(server.sockets).toHaveLength(2);
  });

  it("keeps a server's Keep-Alive hint by the wall clock (a frozen instance fires no timer)", async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const start = Date.UTC(2026, 10, 27);
    vi.setSystemTime(start);
    const server = await fake((socket, n) => socket.write(OK(`{"n":${n}}`, 'keep-alive: timeout=5\r\n')));
    await readBody(await upstream(server.port));
    await turn();
    // Within the hint less a second: the same socket.
    vi.setSystemTime(start + 3_900);
    await readBody(await upstream(server.port));
    expect(server.sockets).toHaveLength(1);
    // 4.1 s after the last answer: the server may be closing it; a new socket, and nothing failed.
    await turn();
    vi.setSystemTime(start + 3_900 + 4_100);
    expect(await readBody(await upstream(server.port))).toBe('{"n":3}');
    expect(server.sockets).toHaveLength(2);
  });
});

describe('TLS', () => {
  it('refuses a certificate for another name, even from a trusted authority', async () => {
    const tls = selfSignedCertificate('other.example');
    const server = await fake((socket) => socket.write(OK('{}')), tls);
    const origin = new Origin(`https://127.0.0.1:${server.port}`, { connectTimeoutMs: 2_000, ca: tls.cert });
    try {
      const failure = await new Promise((resolve) =>
        origin.exchange(
          { path: '/', method: 'POST', body: '{}' },
          { head: () => {}, piece: () => {}, end: () => resolve(undefined), fail: resolve },
        ),
      );
      expect((failure as { code?: string }).code).toBe('ERR_TLS_CERT_ALTNAME_INVALID');
      expect(server.requests()).toBe(0);
    } finally {
      await origin.close();
    }
  });
});

describe('the direct DynamoDB calls', () => {
  const CREDENTIALS = { accessKeyId: 'AKIDTEST', secretAccessKey: 'secret' };
  const wire = (port: number) =>
    new DynamoWire(
      new DynamoDBClient({
        endpoint: `http://127.0.0.1:${port}`,
        region: 'eu-west-1',
        credentials: CREDENTIALS,
      }),
      { connectTimeoutMs: 500, requestTimeoutMs: 1_000, maxAttempts: 1 },
    );

  it('send again at once, on a new connection, when a kept-alive socket closes before any answer', async () => {
    // The server closed the idle socket without this process having read the close yet (a thawed
    // instance): the request dies unanswered on it. One attempt only: the resend is not a retry.
    const server = await fake((socket, n) => (n === 2 ? socket.destroy() : socket.write(OK(`{"n":${n}}`))));
    const direct = wire(server.port);
    expect(await direct.call('GetItem', {})).toEqual({ n: 1 });
    await turn();
    expect(await direct.call('GetItem', {})).toEqual({ n: 3 });
    expect(server.sockets).toHaveLength(2);
  });

  it('refuse an answer past 16 MiB', async () => {
    const size = 17 * 1024 * 1024;
    const server = await fake((socket) =>
      socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${size}\r\n\r\n${'a'.repeat(size)}`),
    );
    await expect(wire(server.port).call('GetItem', {})).rejects.toMatchObject({ name: 'NetworkingError' });
  });
});
