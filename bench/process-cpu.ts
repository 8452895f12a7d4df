import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { basename } from 'node:path';

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

/** CPU ms of several processes (processCpuMs of each); one that has gone counts nothing. */
export function processesCpuMs(pids: readonly number[]): number {
  let ms = 0;
  for (const pid of pids) {
    try {
      ms += processCpuMs(pid);
    } catch {
      // the process has gone
    }
  }
  return ms;
}

/**
 * A process's function instances of one function: its child processes whose working directory is that
 * function's bundle (each launcher starts an instance in its bundle's directory).
 */
export function instancePids(parentPid: number, bundle: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const ppid = Number(readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]?.split(' ')[1]);
      if (ppid === parentPid && basename(readlinkSync(`/proc/${entry}/cwd`)) === bundle)
        pids.push(Number(entry));
    } catch {
      // the process has gone
    }
  }
  return pids;
}
