/**
 * Loaded into the benchmarked gateway process (`node --import tsx --import ./bench/probe.ts`) to
 * measure from inside it (issue 15): on SIGUSR2 the process prints one `PROBE {json}` line with its
 * CPU time (`process.cpuUsage`, all threads, including the emulator's function instances, which are
 * worker threads), its memory (`process.memoryUsage`) and its peak RSS
 * (`process.resourceUsage().maxRSS`). DynamoDB units are counted by bench/capacity-proxy.ts.
 */
process.on('SIGUSR2', () => {
  const cpu = process.cpuUsage();
  const memory = process.memoryUsage();
  console.log(
    `PROBE ${JSON.stringify({
      cpuUserUs: cpu.user,
      cpuSystemUs: cpu.system,
      rss: memory.rss,
      heapUsed: memory.heapUsed,
      external: memory.external,
      maxRssKb: process.resourceUsage().maxRSS,
      at: performance.now(),
    })}`,
  );
});
