import { describe, expect, it } from 'vitest';
import { modelCatalog, readModelCatalog } from '../../../functions/core/catalog.js';
import { parseTierConfig, singleUpstreamConfig } from '../../../functions/core/tiers.js';

describe('the model catalog /models states', () => {
  it("prices each tier per token as billed (table x 1.3, never below), with the tier's context length", () => {
    const tiers = parseTierConfig(singleUpstreamConfig('http://127.0.0.1:9/v1'));
    const catalog = modelCatalog(tiers);
    // The product's rates per million: svc-fast $0.35 in, $1.43 out; svc-heavy $0.78 in, $3.25 out.
    expect(catalog['svc-fast']).toEqual({
      context_length: 128_000,
      pricing: {
        prompt: '0.00000035',
        completion: '0.00000143',
        input_cache_read: '0.000000035',
        request: '0',
      },
    });
    expect(catalog['svc-heavy'].pricing).toMatchObject({ prompt: '0.00000078', completion: '0.00000325' });
  });

  it('takes a context length from the tier configuration, and the primary target prices', () => {
    const target = (output: string) => ({
      baseUrl: 'http://a/v1',
      model: 'm',
      prices: { input: '1', cachedInput: '0.1', output },
    });
    const tiers = parseTierConfig({
      'svc-fast': { targets: [target('2'), target('20')], contextLength: 32_768 },
      'svc-pro': [target('4')],
      'svc-heavy': [target('8')],
    });
    const catalog = modelCatalog(tiers);
    expect(catalog['svc-fast']).toEqual({
      context_length: 32_768,
      pricing: { prompt: '0.0000013', completion: '0.0000026', input_cache_read: '0.00000013', request: '0' },
    });
    expect(readModelCatalog(JSON.stringify(catalog))).toEqual(catalog);
  });

  it('refuses a malformed catalog, and is empty without one', () => {
    expect(readModelCatalog(undefined)).toEqual({});
    expect(() => readModelCatalog('{"svc-fast":{"context_length":-1,"pricing":{}}}')).toThrow(/svc-fast/);
  });
});
