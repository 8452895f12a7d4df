import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { describe, expect, inject, it } from 'vitest';

/** `npm start` when its port is taken (another `npm start` running, say): one clear line, exit 1. */
describe('npm start on a busy port', () => {
  it('says so in one line and exits 1, leaving nothing running', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as { port: number }).port;
    try {
      const child = spawn(process.execPath, ['--import', 'tsx', 'bin/local.ts'], {
        // The suite's DynamoDB Local: no Java start needed for this.
        env: {
          ...process.env,
          PORT: String(port),
          DYNAMODB_ENDPOINT: inject('dynamoEndpoint'),
          UPSTREAM_BASE_URL: '',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr?.on('data', (d: Buffer) => {
        stderr += d.toString();
      });
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      expect(code).toBe(1);
      const lines = stderr.trim().split('\n');
      expect(lines).toEqual([
        expect.stringMatching(new RegExp(`127\\.0\\.0\\.1:${port} is in use .*set PORT`)),
      ]);
    } finally {
      blocker.close();
    }
  }, 60_000);
});
