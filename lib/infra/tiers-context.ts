import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { ConfigurationError } from './configuration-error.js';

/**
 * The tier routing from CDK context, as the CLI passes it whole: `-c tiersFile=<path>` (read here,
 * relative to the working directory) or `-c tiersConfig=<one-line JSON>` (e.g. `"$(jq -c . tiers.json)"`).
 * The CDK CLI keeps only the first line of a multi-line `-c` value, so a pretty-printed file passed
 * inline arrives as `{`: that, or any value that is not JSON, is refused here with what to do instead.
 */
export function tiersFromContext(
  context: (name: string) => string | undefined,
  cwd = process.cwd(),
): string | undefined {
  const file = context('tiersFile');
  const inline = context('tiersConfig');
  if (file !== undefined && inline !== undefined)
    throw new ConfigurationError(
      'give the tier routing once: -c tiersFile=<path> or -c tiersConfig=<one-line JSON>',
    );
  if (file !== undefined) {
    let text: string;
    try {
      text = readFileSync(resolve(cwd, file), 'utf8');
    } catch (error) {
      throw new ConfigurationError(`tiersFile ${file}: cannot read it (${(error as Error).message})`);
    }
    return checkedJson(text, `tiersFile ${file}`);
  }
  if (inline === undefined) return undefined;
  return checkedJson(
    inline,
    'tiersConfig',
    ' (the CDK CLI keeps only the first line of a multi-line -c value: pass -c tiersFile=<path>, or -c tiersConfig="$(jq -c . tiers.json)")',
  );
}

function checkedJson(text: string, source: string, hint = ''): string {
  try {
    JSON.parse(text);
  } catch (error) {
    throw new ConfigurationError(`${source} is not JSON: ${(error as Error).message}${hint}`);
  }
  return text;
}
