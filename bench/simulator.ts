import { startSimulator } from '../functions/simulator/server.js';

/** The upstream simulator in its own process, so the gateway's CPU can be measured alone. */
const simulator = await startSimulator({ port: Number(process.env.PORT ?? 0) });
console.log(`SIMULATOR ${simulator.url}`);
process.on('SIGTERM', () => void simulator.close().then(() => process.exit(0)));
