import { main } from '../lib/admin/cli.js';

// This machine may run Node.js 20 (Lambda runs 22); the SDK's multi-line notice about that would
// break the CLI's one-line error contract.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
process.exitCode = await main(process.argv.slice(2));
