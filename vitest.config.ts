import { defineConfig } from 'vitest/config';

// The global setup (DynamoDB Local) runs in this process, not a worker: the SDK's notice that it will
// want Node 22 (Lambda's runtime; the tests run on 20 too) is kept out of its output as well.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 2,
    // The functions' structured logs are for operators; tests assert behaviour, not log lines.
    env: {
      LOG_LEVEL: 'SILENT',
      POWERTOOLS_METRICS_DISABLED: 'true',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    },
  },
});
