import { Readable } from 'node:stream';
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
 * The compressor is minizlib's Gzip, which drives node:zlib's internals. Lambda updates a runtime's
 * Node on its own: were an update to break minizlib, gzip is switched off and replies go out as they
 * are, instead of every gzip client's request failing. Here minizlib's Gzip cannot be made, as on
 * such a Node (minizlib reaches node:zlib's binding in its constructor).
 */
let tries = 0;
vi.mock('minizlib', () => ({
  Gzip: class {
    constructor() {
      tries += 1;
      throw new Error('zlib binding closed');
    }
  },
}));

describe('gzip where no compressor can be made', () => {
  it('is off: replies go out uncompressed, logged once, tried once', () => {
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
    expect(tries).toBe(1);
  });
});
