import { Readable } from 'node:stream';
import type * as Zlib from 'node:zlib';
import type { Request } from '@middy/core';
import { describe, expect, it, vi } from 'vitest';
import {
  acceptsGzip,
  compressResponse,
  MIN_COMPRESSED_BYTES,
} from '../../../functions/shared/compression.js';
import type { FunctionUrlEvent, FunctionUrlResult } from '../../../functions/shared/http.js';
import { logger } from '../../../functions/shared/observability.js';

/**
 * The compressor drives node:zlib's binding through two of its internals (`_handle`, `_writeState`).
 * Lambda updates a runtime's Node on its own: were an update to change them, gzip is switched off and
 * replies go out as they are, instead of every gzip client's request failing. Here node:zlib's
 * streams come without `_handle`, as such a Node's might.
 */
const made: Zlib.Gzip[] = [];
vi.mock('node:zlib', async (importOriginal) => {
  const zlib = await importOriginal<typeof Zlib>();
  return {
    ...zlib,
    createGzip: (options?: Zlib.ZlibOptions) => {
      const gzip = zlib.createGzip(options);
      made.push(gzip);
      Object.defineProperty(gzip, '_handle', { value: undefined });
      return gzip;
    },
  };
});

describe('gzip on a Node whose zlib internals are not as the compressor knows them', () => {
  it('is off: replies go out uncompressed, logged once, and the compressor tried is closed', () => {
    const logged = vi.spyOn(logger, 'error').mockImplementation(() => {});
    const large = JSON.stringify({ text: 'x'.repeat(MIN_COMPRESSED_BYTES * 2) });
    const stream = Readable.from(['data: {}\n\n']);
    const middleware = compressResponse();
    for (const body of [large, stream]) {
      const request = {
        event: { headers: { 'accept-encoding': 'gzip, deflate' } },
        response: { statusCode: 200, headers: {}, body },
      } as unknown as Request<FunctionUrlEvent, FunctionUrlResult>;
      middleware.after?.(request);
      expect(request.response?.body).toBe(body);
      expect(request.response?.headers['content-encoding']).toBeUndefined();
    }
    expect(acceptsGzip('gzip')).toBe(false);
    expect(logged).toHaveBeenCalledTimes(1);
    expect(logged.mock.calls[0]?.[0]).toContain('gzip is off');
    expect(made).toHaveLength(1);
    expect(made[0]?.destroyed || made[0]?.closed).toBe(true);
  });
});
