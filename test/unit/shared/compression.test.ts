import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants as fsConstants,
  mkdtempSync,
  open,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { constants, createGunzip, gunzipSync } from 'node:zlib';
import type { Request } from '@middy/core';
import fc from 'fast-check';
import { Gzip } from 'minizlib';
import Negotiator from 'negotiator';
import { describe, expect, it, vi } from 'vitest';
import {
  acceptsGzip,
  compressResponse,
  GZIP_OPTIONS,
  gzipStream,
  MIN_COMPRESSED_BYTES,
  SyncGzip,
} from '../../../functions/shared/compression.js';
import type { FunctionUrlEvent, FunctionUrlResult } from '../../../functions/shared/http.js';

const chunk = (i: number) =>
  `data: ${JSON.stringify({
    id: 'gen-1763890000-AbCdEfGhIjKlMnOpQrSt',
    object: 'chat.completion.chunk',
    created: 1763890000,
    model: 'svc-fast',
    system_fingerprint: 'fp_sim',
    choices: [
      { index: 0, delta: { content: ` word${(i * 7919) % 1000}` }, logprobs: null, finish_reason: null },
    ],
  })}\n\n`;

async function readAll(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(part as Buffer);
  return Buffer.concat(parts);
}

function run(acceptEncoding: string | undefined, response: FunctionUrlResult): FunctionUrlResult {
  const request = {
    event: {
      headers: acceptEncoding === undefined ? {} : { 'accept-encoding': acceptEncoding },
    } as FunctionUrlEvent,
    response,
  } as unknown as Request<FunctionUrlEvent, FunctionUrlResult>;
  void compressResponse().after?.(request);
  return request.response as FunctionUrlResult;
}

describe('acceptsGzip', () => {
  it.each([
    ['gzip, deflate', true],
    ['gzip, deflate, br, zstd', true],
    ['br;q=1.0, gzip;q=0.8, *;q=0.1', true],
    ['*', true],
    ['gzip;q=0', false],
    ['br', false],
    ['identity', false],
    ['', false],
    [undefined, false],
  ])('%s -> %s', (header, expected) => {
    expect(acceptsGzip(header)).toBe(expected);
  });

  it('answers as Negotiator does for any value, asked again and in any order (the answers it keeps are bounded)', () => {
    const token = fc.constantFrom(
      'gzip',
      'GZIP',
      'deflate',
      'br',
      'zstd',
      'identity',
      '*',
      'x-gzip',
      'gzip2',
    );
    const q = fc.constantFrom('', ';q=0', ';q=0.0', ';q=0.5', ';q=1', ';q=1.0', ';q=abc', ';Q=0');
    const value = fc.oneof(
      fc
        .array(
          fc.tuple(token, q).map(([t, w]) => `${t}${w}`),
          { maxLength: 5 },
        )
        .map((parts) => parts.join(', ')),
      fc.string({ maxLength: 40 }),
      fc.constantFrom('gzip, '.repeat(60), 'br, '.repeat(80)), // longer than it keeps
    );
    const negotiated = (header: string) =>
      header !== '' &&
      new Negotiator({ headers: { 'accept-encoding': header } }).encoding(['gzip']) === 'gzip';
    fc.assert(
      fc.property(fc.array(value, { minLength: 1, maxLength: 80 }), (values) => {
        for (const header of [...values, ...values.reverse()])
          expect(acceptsGzip(header)).toBe(negotiated(header));
      }),
    );
  });
});

/**
 * The next compressor write fails as zlib reports it: the binding calls its `onerror` during the
 * write (node_zlib.cc, a synchronous write's failure), here with Z_STREAM_ERROR.
 */
/** The next write to a compressor fails as minizlib reports a zlib failure: an 'error' event in the write. */
function failNextWrite() {
  return vi.spyOn(Gzip.prototype, 'write').mockImplementationOnce(function (this: Gzip) {
    this.emit('error', new Error('zlib: stream error'));
    return false;
  });
}

describe('SyncGzip', () => {
  it('returns each write compressed whole (every prefix decodes), one gzip member in all', () => {
    const gzip = new SyncGzip();
    const parts = [0, 1, 2].map((i) => gzip.write(chunk(i)));
    parts.forEach((_, i) => {
      const prefix = gunzipSync(Buffer.concat(parts.slice(0, i + 1)), {
        finishFlush: constants.Z_SYNC_FLUSH,
      });
      expect(prefix.toString()).toBe(
        [0, 1, 2]
          .slice(0, i + 1)
          .map(chunk)
          .join(''),
      );
    });
    const whole = gunzipSync(Buffer.concat([...parts, gzip.end()]));
    expect(whole.toString()).toBe([0, 1, 2].map(chunk).join(''));
  });

  it('throws to its writer when compression fails, never as an uncaught error event', async () => {
    const gzip = new SyncGzip();
    gzip.write(chunk(0));
    const write = failNextWrite();
    try {
      expect(() => gzip.write(chunk(1))).toThrow('zlib: stream error');
      // No 'error' event follows (none would have a listener: an uncaught exception).
      await new Promise((resolve) => setImmediate(resolve));
      expect(() => gzip.write(chunk(2))).toThrow('zlib: stream error');
      expect(() => gzip.end()).toThrow('zlib: stream error');
    } finally {
      write.mockRestore();
      gzip.close();
    }
    // The failed compressor is not kept: the next stream is whole.
    const next = new SyncGzip();
    expect(gunzipSync(Buffer.concat([next.write(chunk(2)), next.end()])).toString()).toBe(chunk(2));
    const closed = new SyncGzip();
    closed.close();
    expect(() => closed.write('x')).toThrow();
  });

  it('compresses a write larger than its output space whole', () => {
    // Random bytes do not compress: the output passes the 16 KiB the compressor writes into at a time.
    const large = randomBytes(96 * 1024);
    const gzip = new SyncGzip();
    const parts = [gzip.write(large), gzip.write(chunk(1))];
    expect(
      gunzipSync(Buffer.concat([...parts, gzip.end()])).equals(Buffer.concat([large, Buffer.from(chunk(1))])),
    ).toBe(true);
  });

  it('a compressor kept from one stream writes, for the next, exactly the bytes a new one writes', () => {
    const writeAll = (gzip: { write(d: string): Buffer; end(): Buffer }, chunks: string[]) =>
      Buffer.concat([...chunks.map((c) => gzip.write(c)), gzip.end()]);
    const fresh = (chunks: string[]) => {
      const gzip = new Gzip({ ...GZIP_OPTIONS, flush: constants.Z_SYNC_FLUSH });
      const out: Buffer[] = [];
      gzip.on('data', (d: Buffer) => out.push(d));
      const writeOne = (d: string) => {
        gzip.write(d);
        return Buffer.concat(out.splice(0));
      };
      const bytes = writeAll(
        {
          write: writeOne,
          end: () => {
            gzip.end();
            return Buffer.concat(out.splice(0));
          },
        },
        chunks,
      );
      gzip.close();
      return bytes;
    };
    const a = [0, 1, 2, 3].map(chunk);
    const b = ['a secret another client sent ', ...[7, 8].map(chunk)];
    // One stream ends, the next takes its compressor: the same bytes as from a new compressor, and
    // nothing of the first stream's text in them (its window is gone with the reset).
    const first = writeAll(new SyncGzip(), b);
    const second = writeAll(new SyncGzip(), a);
    expect(first.equals(fresh(b))).toBe(true);
    expect(second.equals(fresh(a))).toBe(true);
    // A stream dropped half-way (its client went away) leaves its compressor mid-member: the next
    // stream still starts clean.
    const dropped = new SyncGzip();
    dropped.write(b[0] ?? '');
    dropped.close();
    dropped.close(); // twice is harmless (a destroyed relay closes after its end)
    expect(writeAll(new SyncGzip(), a).equals(fresh(a))).toBe(true);
    // Two streams at once in one process: the second makes its own; each decodes whole.
    const one = new SyncGzip();
    const two = new SyncGzip();
    const oneParts = [one.write(a[0] ?? '')];
    const twoParts = [two.write(b[0] ?? '')];
    oneParts.push(one.write(a[1] ?? ''), one.end());
    twoParts.push(two.write(b[1] ?? ''), two.end());
    expect(gunzipSync(Buffer.concat(oneParts)).toString()).toBe(`${a[0]}${a[1]}`);
    expect(gunzipSync(Buffer.concat(twoParts)).toString()).toBe(`${b[0]}${b[1]}`);
  });
});

/** This process's threads blocked opening a FIFO until a writer comes (Linux: /proc's wchan). */
function threadsWaitingForFifo(): number {
  return readdirSync('/proc/self/task').filter((tid) => {
    try {
      return readFileSync(`/proc/self/task/${tid}/wchan`, 'utf8') === 'wait_for_partner';
    } catch {
      return false;
    }
  }).length;
}

/** Opens a FIFO's write end (and closes it), waiting while no reader has it open. */
async function openForWriteOnceRead(fifo: string): Promise<void> {
  for (let tries = 0; ; tries++) {
    try {
      closeSync(openSync(fifo, fsConstants.O_WRONLY | fsConstants.O_NONBLOCK));
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENXIO' || tries >= 2_000) throw error;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }
}

describe('gzipStream', () => {
  it('emits each write as a decodable block before the next write arrives', async () => {
    const source = new PassThrough();
    const decoded = gzipStream(source).pipe(createGunzip());
    const received: string[] = [];
    decoded.on('data', (part: Buffer) => received.push(part.toString()));
    for (let i = 0; i < 5; i++) {
      source.write(chunk(i));
      // Nothing else is written until this event has come out the other side, decoded.
      await expect.poll(() => received.join(''), { timeout: 2_000, interval: 5 }).toContain(chunk(i));
    }
    source.end();
    await new Promise((done) => decoded.on('end', done));
    expect(received.join('')).toBe([0, 1, 2, 3, 4].map(chunk).join(''));
  });

  it('sends a 300-chunk stream in under a fifth of its bytes', async () => {
    const text = Array.from({ length: 300 }, (_, i) => chunk(i)).join('');
    const source = new PassThrough();
    const compressed = readAll(gzipStream(source));
    for (let i = 0; i < 300; i++) source.write(chunk(i));
    source.end();
    const bytes = await compressed;
    expect(gunzipSync(bytes).toString()).toBe(text);
    expect(bytes.length).toBeLessThan(Buffer.byteLength(text) / 5);
  });

  it("compresses each write on the writer's thread: a busy thread pool does not hold events back", async () => {
    // Every thread of libuv's pool is made to wait in open(2) on a FIFO nobody writes to, as a
    // slow DNS lookup or file read would hold it; node:zlib's stream compresses on that pool.
    const dir = mkdtempSync(join(tmpdir(), 'pool-'));
    const poolSize = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
    const fifos = Array.from({ length: poolSize }, (_, i) => join(dir, `fifo-${i}`));
    for (const fifo of fifos) expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const held = fifos.map(
      (fifo) =>
        new Promise<number>((done, fail) => open(fifo, 'r', (error, fd) => (error ? fail(error) : done(fd)))),
    );
    try {
      // Ready once every pool thread waits in that open(2) (its kernel wait channel says so): started
      // too early, the writes would race the pool's threads instead of finding them held.
      await expect.poll(threadsWaitingForFifo, { timeout: 10_000, interval: 5 }).toBe(poolSize);
      const source = new PassThrough();
      const segments: Buffer[] = [];
      gzipStream(source).on('data', (segment: Buffer) => segments.push(segment));
      for (let i = 0; i < 3; i++) source.write(chunk(i));
      // A member's start, flushed: readable as far as it goes.
      const decoded = () =>
        gunzipSync(Buffer.concat(segments), { finishFlush: constants.Z_SYNC_FLUSH }).toString();
      await expect.poll(decoded, { timeout: 2_000, interval: 5 }).toBe(chunk(0) + chunk(1) + chunk(2));
    } finally {
      // Releases the pool: a writer's open ends each reader's wait (ENXIO: its reader is not there yet).
      for (const fifo of fifos) await openForWriteOnceRead(fifo);
      for (const fd of await Promise.all(held)) closeSync(fd);
      rmSync(dir, { recursive: true });
    }
  });

  it('fails when its source fails', async () => {
    const source = new PassThrough();
    const gz = gzipStream(source);
    const failed = new Promise((done) => gz.once('error', done));
    source.write(chunk(1));
    source.destroy(new Error('upstream lost'));
    expect(await failed).toMatchObject({ message: 'upstream lost' });
    expect(gz.destroyed).toBe(true);
  });
});

describe('gzipStream, whatever is written', () => {
  /** Writes of every size, text beyond ASCII and binary, some longer than the priming window. */
  const writes = [
    ...Array.from({ length: 40 }, (_, i) => Buffer.from(chunk(i))),
    Buffer.from(`data: ${JSON.stringify({ arguments: 'é∑🙂'.repeat(3_000) })}\n\n`),
    randomBytes(5_000),
    Buffer.from(': keep-alive\n\n'),
    Buffer.from('x'),
    ...Array.from({ length: 10 }, (_, i) => Buffer.from(chunk(100 + i))),
  ];

  async function compressedWrites(parts: Buffer[]): Promise<{ segments: Buffer[]; whole: Buffer }> {
    const source = new PassThrough();
    const gz = gzipStream(source);
    const segments: Buffer[] = [];
    gz.on('data', (segment: Buffer) => segments.push(segment));
    const ended = new Promise((done) => gz.on('end', done));
    for (const part of parts) source.write(part);
    source.end();
    await ended;
    return { segments, whole: Buffer.concat(segments) };
  }

  it("is one gzip member Node's inflater reads whole, its CRC and length checked", async () => {
    const { whole } = await compressedWrites(writes);
    expect(gunzipSync(whole).equals(Buffer.concat(writes))).toBe(true);
    // An empty stream is a valid, empty member.
    expect(gunzipSync((await compressedWrites([])).whole).length).toBe(0);
  });
});

describe('compressResponse', () => {
  const sse = (): FunctionUrlResult => ({
    statusCode: 200,
    headers: { 'content-type': 'text/event-stream' },
    body: Readable.from([chunk(1), chunk(2)]),
  });

  it('gzips a stream for a client that accepts gzip, with Vary', async () => {
    const response = run('gzip, deflate', sse());
    expect(response.headers['content-encoding']).toBe('gzip');
    expect(response.headers.vary).toBe('accept-encoding');
    expect(gunzipSync(await readAll(response.body as Readable)).toString()).toBe(chunk(1) + chunk(2));
  });

  it('leaves the body as it is when the client does not accept gzip', () => {
    for (const header of [undefined, 'identity', 'gzip;q=0', 'br']) {
      const original = sse();
      const response = run(header, original);
      expect(response.body).toBe(original.body);
      expect(response.headers['content-encoding']).toBeUndefined();
    }
  });

  it('throws a failed compression of a JSON body to the handler and frees its compressor', () => {
    const large = JSON.stringify({ text: 'x'.repeat(MIN_COMPRESSED_BYTES * 2) });
    const freed = vi.spyOn(Gzip.prototype, 'close');
    const write = failNextWrite();
    try {
      expect(() => run('gzip', { statusCode: 200, headers: {}, body: large })).toThrow('zlib: stream error');
      expect(freed).toHaveBeenCalledTimes(1);
    } finally {
      write.mockRestore();
      freed.mockRestore();
    }
  });

  it('gzips a large JSON body and leaves a small one alone', async () => {
    const large = JSON.stringify({ text: 'x'.repeat(MIN_COMPRESSED_BYTES * 2) });
    const response = run('gzip', { statusCode: 200, headers: {}, body: large });
    expect(response.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(await readAll(response.body as Readable)).toString()).toBe(large);

    const small = JSON.stringify({ ok: true });
    const untouched = run('gzip', { statusCode: 200, headers: {}, body: small });
    expect(untouched.body).toBe(small);
    expect(untouched.headers['content-encoding']).toBeUndefined();
  });

  it('does not encode a body that already has a content-encoding', () => {
    const body = 'y'.repeat(MIN_COMPRESSED_BYTES * 2);
    const response = run('gzip', { statusCode: 200, headers: { 'content-encoding': 'br' }, body });
    expect(response.body).toBe(body);
  });
});
