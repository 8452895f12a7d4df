import { main } from '../lib/admin/cli.js';

process.exitCode = await main(process.argv.slice(2));
