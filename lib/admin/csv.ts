/**
 * CSV for operator exports: the one CSV writer of the repository (functions/shared/csv.ts), which the
 * dashboard's monthly statement writes with too.
 */
export { csvCell, toCsv } from '../../functions/shared/csv.js';
