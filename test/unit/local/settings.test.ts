import { describe, expect, it } from 'vitest';
import { dynamoLimitsScale } from '../../../lib/local/settings.js';

describe('DYNAMODB_LIMITS', () => {
  it('is off when unset or empty, a scale factor of 1 or more when set', () => {
    expect(dynamoLimitsScale({})).toBeUndefined();
    expect(dynamoLimitsScale({ DYNAMODB_LIMITS: '' })).toBeUndefined();
    expect(dynamoLimitsScale({ DYNAMODB_LIMITS: '1' })).toBe(1);
    expect(dynamoLimitsScale({ DYNAMODB_LIMITS: '25' })).toBe(25);
  });

  it('refuses a value that is not a scale factor, naming the variable', () => {
    for (const bad of ['0', '0.5', '-3', 'on', 'NaN'])
      expect(() => dynamoLimitsScale({ DYNAMODB_LIMITS: bad })).toThrow(/DYNAMODB_LIMITS/);
  });
});
