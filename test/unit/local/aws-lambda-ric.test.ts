import { describe, expect, it } from 'vitest';
import { lambdaNodeFlags } from '../../../lib/local/aws-lambda-ric.js';

describe('lambdaNodeFlags', () => {
  it("gives the heap limits Lambda's Node bootstrap derives from the memory size", () => {
    // A tenth of the memory for the young generation (two semi-spaces), the rest for the old.
    expect(lambdaNodeFlags(128)).toEqual([
      '--expose-gc',
      '--max-http-header-size=81920',
      '--max-semi-space-size=6',
      '--max-old-space-size=116',
    ]);
    expect(lambdaNodeFlags(256)).toContain('--max-semi-space-size=12');
    expect(lambdaNodeFlags(256)).toContain('--max-old-space-size=231');
    expect(lambdaNodeFlags(1769)).toContain('--max-old-space-size=1593');
  });
});
