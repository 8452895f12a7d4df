import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { isIP } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A self-signed certificate for `name` (an IP address or a DNS name; 127.0.0.1 unless given; EC P-256,
 * valid a day), made with openssl, for the loopback TLS servers of tests and benches: its key and
 * certificate as PEM (the certificate is its own CA).
 */
export function selfSignedCertificate(name = '127.0.0.1'): { key: string; cert: string } {
  const dir = mkdtempSync(join(tmpdir(), 'self-signed-'));
  try {
    execFileSync(
      'openssl',
      [
        ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'],
        ...['-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '1'],
        ...['-subj', `/CN=${name}`, '-addext', `subjectAltName=${isIP(name) ? 'IP' : 'DNS'}:${name}`],
      ],
      { stdio: 'ignore' },
    );
    return {
      key: readFileSync(join(dir, 'key.pem'), 'utf8'),
      cert: readFileSync(join(dir, 'cert.pem'), 'utf8'),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
