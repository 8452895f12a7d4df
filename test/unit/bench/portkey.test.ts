import { describe, expect, it } from 'vitest';
import { portkeyCommand, portkeyPackage } from '../../../bench/portkey.js';
import { NODE22 } from '../../../lib/local/aws-lambda-ric.js';

/**
 * The side by side's Portkey runs as the functions it is compared with run: started with the bench's
 * own Node (20), it read about 1.4x the CPU per request it reads on Node 22 (bench/README.md).
 */
describe('portkeyCommand', () => {
  it("starts Portkey on the functions' Node 22, not on the Node running the bench", () => {
    const command = portkeyCommand(8787);
    expect(command.node).toBe(NODE22);
    expect(command.node).not.toBe(process.execPath);
    expect(command.args.slice(1)).toEqual(['--port=8787', '--headless']);
    expect(command.env.NODE_ENV).toBe('production');
  });

  it('pins Portkey 1.15.2 and the @hono/node-server its streams need', () => {
    expect(portkeyPackage()).toMatchObject({
      dependencies: { '@portkey-ai/gateway': '1.15.2' },
      overrides: { '@hono/node-server': '1.13.8' },
    });
  });
});
