/**
 * CPU of `count` calls of `work`, each `gapMs` after the last (as an instance between events or
 * invocations, its caches cooling), in microseconds per call: the calls' own CPU, the waits not.
 * `work`'s last result is returned with it.
 */
export async function pacedCpuUs<T>(
  work: (i: number) => T,
  gapMs: number,
  count: number,
): Promise<{ us: number; last: T | undefined }> {
  let cpu = 0;
  let last: T | undefined;
  for (let i = 0; i < count; i++) {
    await new Promise((resolve) => setTimeout(resolve, gapMs));
    const start = process.cpuUsage();
    last = work(i);
    const used = process.cpuUsage(start);
    cpu += used.user + used.system;
  }
  return { us: cpu / count, last };
}
