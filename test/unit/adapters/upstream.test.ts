import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createServer as createTlsServer } from 'node:tls';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { openWithFallback, readBody } from '../../../functions/adapters/upstream.js';
import { UpstreamError } from '../../../functions/core/errors.js';
import type { UpstreamTarget } from '../../../functions/core/tiers.js';
import { selfSignedCertificate } from '../../support/certificate.js';

/**
 * The upstream call as it goes out on the wire (Node's HTTP client, functions/adapters/origin.ts),
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

/**
 * A server that records each request's bytes (up to its content-length body) and answers with `reply`
 * (or does to the socket what `reply` does); over TLS with `tls`'s key and certificate.
 */
async function recording(reply: string | ((socket: Socket) => void), tls?: { key: string; cert: string }) {
  const requests: string[] = [];
  const sockets: Socket[] = [];
  const onSocket = (socket: Socket) => {
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
      if (typeof reply === 'string') socket.write(reply);
      else reply(socket);
    });
    socket.on('error', () => {});
  };
  const server: Server = tls ? createTlsServer(tls, onSocket) : createServer(onSocket);
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
      `POST /api/v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:${server.port}\r\nconnection: keep-alive\r\n` +
        'content-type: application/json\r\naccept: application/json\r\nauthorization: Bearer sk-test\r\n' +
        `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    // A second call goes on the same kept-alive socket.
    await new Promise((ready) => setImmediate(ready));
    const again = await call(`http://127.0.0.1:${server.port}/api/v1`, 'sk-test');
    if (!again.stream) await readBody(again.body);
    expect(server.sockets).toHaveLength(1);
  });

  it('keeps one client per base URL however many there are: each reuses its socket', async () => {
    const server = await recording(REPLY);
    const bases = Array.from({ length: 70 }, (_, i) => `http://127.0.0.1:${server.port}/tier-${i}`);
    for (const base of [...bases, ...bases]) {
      const opened = await call(base, 'sk-test');
      if (!opened.stream) await readBody(opened.body);
    }
    expect(server.requests).toHaveLength(140);
    expect(server.sockets).toHaveLength(70);
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

describe('a failed attempt', () => {
  it.each([
    [
      'an answer that is not HTTP/1.1 as Node reads it',
      'HTTP/1.1 200 OK\r\ncontent-length : 2\r\n\r\n{}',
      'HPE_INVALID_HEADER_TOKEN: Parse Error: Invalid header field char',
    ],
    ['a connection ended unanswered', (socket: Socket) => socket.end(), 'ECONNRESET: socket hang up'],
  ])('says why in its reason, for the log line: %s', async (_case, reply, why) => {
    const server = await recording(reply);
    const failures: string[] = [];
    const error = await call(`http://127.0.0.1:${server.port}/v1`, 'sk-test', failures).catch(
      (failure: unknown) => failure,
    );
    expect(error).toBeInstanceOf(UpstreamError);
    expect(failures).toEqual([`connection failed (${why})`, `connection failed (${why})`]);
  });
});

describe('an https upstream', () => {
  it("is verified against Node's certificate authorities, NODE_EXTRA_CA_CERTS among them", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'upstream-ca-'));
    try {
      const tls = selfSignedCertificate();
      writeFileSync(join(dir, 'cert.pem'), tls.cert);
      const server = await recording(REPLY, tls);
      // NODE_EXTRA_CA_CERTS is read when a process starts: each way runs in a process of its own.
      const script = join(dir, 'call.mts');
      writeFileSync(
        script,
        `const { openWithFallback, readBody } = await import(${JSON.stringify(pathToFileURL(resolve('functions/adapters/upstream.ts')).href)});
const failures = [];
try {
  const opened = await openWithFallback({
    targets: [{ baseUrl: process.argv[2], model: 'm' }],
    bodyFor: () => ({ model: 'm', messages: [] }),
    credential: async () => undefined,
    policy: { attemptsPerTarget: 1, baseDelayMs: 1, maxDelayMs: 1, firstByteTimeoutMs: 5000 },
    maxBytes: 1000000,
    deadline: Date.now() + 10000,
    onAttemptFailed: ({ reason }) => failures.push(reason),
  });
  console.log(await readBody(opened.body));
} catch {
  console.log('failed: ' + failures.join('; '));
}
`,
      );
      const run = async (env: Record<string, string>) => {
        const { NODE_EXTRA_CA_CERTS: _unset, ...inherited } = process.env;
        const { stdout } = await promisify(execFile)(
          process.execPath,
          ['--import', 'tsx', script, `https://127.0.0.1:${server.port}/v1`],
          { env: { ...inherited, ...env } },
        );
        return stdout.trim();
      };
      expect(await run({ NODE_EXTRA_CA_CERTS: join(dir, 'cert.pem') })).toBe(REPLY_BODY);
      expect(await run({})).toMatch(
        /^failed: connection failed \(DEPTH_ZERO_SELF_SIGNED_CERT: self[- ]signed certificate/,
      );
      expect(server.requests).toHaveLength(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
