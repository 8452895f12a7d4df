import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { BodyTooLargeError, UpstreamBody } from '../../../functions/adapters/upstream-body.js';

/** A loopback server that writes `pieces`, then resets the TCP connection once they are flushed. */
async function resettingServer(pieces: string[]) {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    pieces.forEach((piece, i) => {
      res.write(piece, i === pieces.length - 1 ? () => res.socket?.resetAndDestroy() : undefined);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

function get(port: number, maxBytes = 10_000_000): Promise<UpstreamBody> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'GET' }, (res) =>
      resolve(new UpstreamBody(res, maxBytes)),
    );
    req.on('error', reject);
    req.end();
  });
}

/** Reads the body to its end or fault; a slow reader waits `delayMs` before every tenth read. */
async function drain(body: UpstreamBody, delayMs = 0) {
  let text = '';
  let reads = 0;
  try {
    for (;;) {
      if (delayMs && reads++ % 10 === 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      const piece = await body.read(10_000);
      if (piece === null || piece === 'timeout') return { text, fault: undefined, end: piece };
      text += piece.toString();
    }
  } catch (fault) {
    return { text, fault, end: undefined };
  }
}

describe('UpstreamBody', () => {
  it('hands on every piece received before a connection reset, then the fault, even to a slow reader', async () => {
    const pieces = Array.from({ length: 2_000 }, (_, i) => `data: {"n":${i}}\n\n`);
    const { server, port } = await resettingServer(pieces);
    try {
      const body = await get(port);
      // The reader starts late and reads slowly: the reset arrives while pieces wait for it.
      await new Promise((resolve) => setTimeout(resolve, 50));
      const { text, fault } = await drain(body, 1);
      expect(fault).toBeInstanceOf(Error);
      expect(text).toBe(pieces.join(''));
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  it('is a fault past its byte bound, after the pieces within it', async () => {
    const { server, port } = await resettingServer(['a'.repeat(1_000), 'b'.repeat(1_000)]);
    try {
      const { text, fault } = await drain(await get(port, 1_500));
      expect(fault).toBeInstanceOf(BodyTooLargeError);
      expect(text).toBe('a'.repeat(1_000));
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  it("answers 'timeout' when nothing arrives in time, and can be read on after it", async () => {
    let finish: () => void = () => {};
    const server = createServer((_req, res) => {
      res.writeHead(200);
      res.write('first');
      finish = () => res.end('last');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const body = await get((server.address() as AddressInfo).port);
      expect((await body.read(5_000))?.toString()).toBe('first');
      expect(await body.read(20)).toBe('timeout');
      finish();
      expect((await body.read(5_000))?.toString()).toBe('last');
      expect(await body.read(5_000)).toBeNull();
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
