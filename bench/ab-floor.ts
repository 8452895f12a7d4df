/**
 * For bench/ab-cpu.ts: the floors with billing of the checkout this runs in (its working directory),
 * from that checkout's own bench/bare-proxy.ts, so that one checkout's floor can be measured against
 * another's. Prints `FLOOR <json url> <stream url>`; its instances are its child processes.
 * AB_FLOOR_BILLING: the billing environment (JSON), UPSTREAM_BASE_URL: the simulator.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const { startBareProxies } = (await import(pathToFileURL(resolve('bench/bare-proxy.ts')).href)) as {
  startBareProxies: (
    upstream: string,
    billing: Record<string, string>,
  ) => Promise<{ urls: Record<string, string>; close: () => Promise<void> }>;
};
const bare = await startBareProxies(
  process.env.UPSTREAM_BASE_URL ?? '',
  JSON.parse(process.env.AB_FLOOR_BILLING ?? '{}') as Record<string, string>,
);
console.log(`FLOOR ${bare.urls['bare-billed']} ${bare.urls['bare-billed-stream']}`);
process.once('SIGTERM', () => void bare.close().then(() => process.exit(0)));
