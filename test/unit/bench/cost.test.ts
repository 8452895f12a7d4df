import { describe, expect, it } from 'vitest';
import { percent, requestCost, usd } from '../../../bench/cost.js';

/** The benchmark's cost arithmetic (issue 15), checked against the figures worked by hand. */
describe('requestCost', () => {
  const typical = {
    durationMs: 4250,
    readUnits: 2,
    writeUnits: 4,
    bytesOut: 0,
    promptTokens: 500,
    completionTokens: 300,
  };

  it("prices the issue's typical svc-fast request at 1024 MB", () => {
    const cost = requestCost(typical, 'svc-fast', 1024);
    // 1 GB x 4.25 s x $0.0000133334 + $0.0000002 = $0.00005686695
    expect(usd(cost.lambda)).toBe('$0.000056867');
    // 2 x $0.125 + 4 x $0.625 per million = $0.00000275
    expect(usd(cost.dynamo)).toBe('$0.00000275');
    // one HTTPS request, no bytes: $0.000001
    expect(usd(cost.cloudFront)).toBe('$0.000001');
    // upstream: (500 x 0.269230769230769 + 300 x 1.1) / 1e6 = $0.000464615384615...;
    // billed: that x 1.3, rounded up to a nano-USD = $0.000604 (the figure); margin $0.000139385
    expect(usd(cost.margin)).toBe('$0.000139385');
    // ($0.000056867 + $0.00000275 + $0.000001) / $0.000139385
    expect(percent(cost.infra, cost.margin)).toBe('43.5%');
  });

  it('scales the duration charge with memory and bills whole milliseconds', () => {
    const at128 = requestCost({ ...typical, durationMs: 4249.2 }, 'svc-fast', 128);
    // 0.125 GB x 4.25 s (4249.2 ms rounds up) x $0.0000133334 + $0.0000002
    expect(usd(at128.lambda)).toBe('$0.000007283');
  });

  it('charges CloudFront transfer by the byte', () => {
    const gib = requestCost({ ...typical, bytesOut: 1024 ** 3 }, 'svc-fast', 128);
    expect(usd(gib.cloudFront)).toBe('$0.085001');
  });
});
