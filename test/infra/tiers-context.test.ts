import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tiersFromContext } from '../../lib/infra/tiers-context.js';

const PRETTY = '{\n  "svc-fast": {\n    "targets": []\n  }\n}\n';
const from = (values: Record<string, string>) => (name: string) => values[name];

describe('the tier routing from CDK context', () => {
  it('reads -c tiersFile=<path> relative to the working directory, whole', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tiers-'));
    writeFileSync(join(dir, 'tiers.json'), PRETTY);
    expect(tiersFromContext(from({ tiersFile: 'tiers.json' }), dir)).toBe(PRETTY);
  });

  it('takes one-line JSON inline', () => {
    expect(tiersFromContext(from({ tiersConfig: '{"a":1}' }))).toBe('{"a":1}');
    expect(tiersFromContext(from({}))).toBeUndefined();
  });

  it('refuses what the CLI leaves of a multi-line value (its first line), saying to pass a file', () => {
    expect(() => tiersFromContext(from({ tiersConfig: PRETTY.split('\n')[0] ?? '' }))).toThrow(
      /tiersConfig is not JSON.*first line of a multi-line -c value.*-c tiersFile=<path>/,
    );
  });

  it('refuses a missing or broken file, and both forms at once', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tiers-'));
    expect(() => tiersFromContext(from({ tiersFile: 'nope.json' }), dir)).toThrow(
      /tiersFile nope.json: cannot read/,
    );
    writeFileSync(join(dir, 'bad.json'), '{ "a": ');
    expect(() => tiersFromContext(from({ tiersFile: 'bad.json' }), dir)).toThrow(
      /tiersFile bad.json is not JSON/,
    );
    expect(() => tiersFromContext(from({ tiersFile: 'x', tiersConfig: '{}' }), dir)).toThrow(/once/);
  });
});
