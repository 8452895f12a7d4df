import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it, vi } from 'vitest';
import { Origin } from '../../../functions/adapters/origin.js';
import {
  BodyTooLargeError,
  openStream,
  type UpstreamBody,
} from '../../../functions/adapters/upstream-body.js';

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

/** A GET's body as the upstream call reads one: through the origin's exchange, into an UpstreamBody. */
async function get(port: number, maxBytes = 10_000_000): Promise<UpstreamBody> {
  const origin = new Origin(`http://127.0.0.1:${port}`, { connectTimeoutMs: 2_000 });
  const { body } = await openStream(origin, { path: '/', method: 'GET' }, maxBytes).answer;
  return body;
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
      // No time to wait (none, a negative one, not a number) is 'timeout' at once, not a wait.
      for (const none of [0, -5, Number.NaN]) expect(await body.read(none)).toBe('timeout');
      finish();
      expect((await body.read(5_000))?.toString()).toBe('last');
      expect(await body.read(5_000)).toBeNull();
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  it('waits for each read its own time: a later deadline past an earlier timer, an earlier one before a later', async () => {
    const server = createServer((_req, res) => {
      res.writeHead(200);
      res.write('first');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const body = await get((server.address() as AddressInfo).port);
      expect((await body.read(5_000))?.toString()).toBe('first');
      // The timer armed for 5 s is kept; a shorter wait still ends in its own time.
      let started = Date.now();
      expect(await body.read(30)).toBe('timeout');
      expect(Date.now() - started).toBeLessThan(2_000);
      // A timer armed for 30 ms from an earlier read wakes this one early; it waits on to its own.
      void body.read(30).catch(() => {});
      started = Date.now();
      expect(await body.read(150)).toBe('timeout');
      expect(Date.now() - started).toBeGreaterThanOrEqual(149);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  it('sets one timer for a paced stream, not one per read, and none once the body has ended', async () => {
    const server = createServer(async (_req, res) => {
      res.writeHead(200);
      for (let i = 0; i < 40; i++) {
        res.write(`piece ${i};`);
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const activeTimersBefore = process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
    const timers = vi.spyOn(globalThis, 'setTimeout');
    try {
      const body = await get((server.address() as AddressInfo).port);
      let reads = 0;
      for (let piece = await body.read(60_000); piece !== null; piece = await body.read(60_000)) reads += 1;
      expect(reads).toBeGreaterThan(10);
      // Each read's deadline is a little later than the last: the first timer serves them all.
      const long = timers.mock.calls.filter(([, ms]) => typeof ms === 'number' && ms > 50_000);
      expect(long).toHaveLength(1);
      expect(process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length).toBeLessThan(
        activeTimersBefore + 1,
      );
    } finally {
      timers.mockRestore();
      server.closeAllConnections();
      server.close();
    }
  });
});
