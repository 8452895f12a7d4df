import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU ms of every thread of one process: the time each has run (/proc/<pid>/task/<tid>/schedstat,
 * nanoseconds, so short runs are measured exactly); a thread that has gone counts nothing.
 */
export function processCpuMs(pid: number): number {
  let ns = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread has gone
    }
  }
  return ns / 1e6;
}
