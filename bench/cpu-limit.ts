/**
 * Gives a process the CPU share a Lambda function of a given memory size gets (issue 15, an
 * approach like AWS Lambda Power Tuning): 1 vCPU at 1,769 MB, proportionally less below. The
 * process is pinned to one core (`taskset`) and put in a cgroup (v1 `cpu` controller) whose CFS
 * quota is that share of each 20 ms period. Linux only, and it needs write access to
 * /sys/fs/cgroup/cpu; `available()` says whether it can run here.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';

const ROOT = '/sys/fs/cgroup/cpu';
export const FULL_VCPU_MB = 1769;
export const PERIOD_US = 20_000;

export function cpuShare(memoryMb: number): number {
  return Math.min(1, memoryMb / FULL_VCPU_MB);
}

export interface CpuLimit {
  set(memoryMb: number): void;
  /** Times the cgroup was throttled and for how long, since it was made (cpu.stat). */
  stat(): { throttled: number; throttledMs: number };
  release(): void;
}

export function available(): boolean {
  if (!existsSync(join(ROOT, 'cpu.cfs_quota_us'))) return false;
  const probe = join(ROOT, `bench-probe-${process.pid}`);
  try {
    mkdirSync(probe);
    rmdirSync(probe);
    return spawnSync('taskset', ['--version']).status === 0;
  } catch {
    return false;
  }
}

/**
 * Pins a process (all its threads) to one core; the processes and threads it starts later inherit
 * that. The bench pins itself to core 0 before it starts what it measures, so that the one limited
 * process has core 1 to itself: on a 2-vCPU machine its peers (the upstream, the client, the
 * emulator, DynamoDB Local) otherwise run on its core, and their cache traffic is charged to it.
 */
export function pinToCore(pid: number, core: number): void {
  const pinned = spawnSync('taskset', ['-a', '-p', '-c', String(core), String(pid)]);
  if (pinned.status !== 0) throw new Error(`taskset failed: ${pinned.stderr.toString()}`);
}

export function limitCpu(pid: number, core = 1): CpuLimit {
  const dir = join(ROOT, `bench-${pid}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'cpu.cfs_period_us'), String(PERIOD_US));
  writeFileSync(join(dir, 'cgroup.procs'), String(pid));
  pinToCore(pid, core);
  return {
    set(memoryMb) {
      const share = cpuShare(memoryMb);
      writeFileSync(join(dir, 'cpu.cfs_quota_us'), share >= 1 ? '-1' : String(Math.round(share * PERIOD_US)));
    },
    stat() {
      const text = readFileSync(join(dir, 'cpu.stat'), 'utf8');
      const value = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
      return { throttled: value('nr_throttled'), throttledMs: value('throttled_time') / 1e6 };
    },
    release() {
      writeFileSync(join(dir, 'cpu.cfs_quota_us'), '-1');
      // Move the process back to the root group so the directory can go.
      try {
        writeFileSync(join(ROOT, 'cgroup.procs'), String(pid));
      } catch {
        // the process may be gone
      }
      spawnSync('taskset', ['-a', '-p', '-c', `0-${cpus().length - 1}`, String(pid)]);
      try {
        rmdirSync(dir);
      } catch {
        // still busy: left for the OS
      }
    },
  };
}
