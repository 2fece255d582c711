// Print vitest's JSON report as the one closing line CI reads: "N passed, N failed, N skipped".
// A run with no test, or (under CI) with a skipped test, fails: a skip proves nothing.
import { existsSync, readFileSync } from 'node:fs';

const file = process.argv[2];
if (!file || !existsSync(file)) {
  console.log('0 passed, 1 failed');
  process.exit(1);
}
const report = JSON.parse(readFileSync(file, 'utf8'));
const skipped = report.numPendingTests + report.numTodoTests;
const failedSuites = report.testResults.filter(
  (suite) => suite.status === 'failed' && suite.assertionResults.length === 0,
);
const failed = report.numFailedTests + failedSuites.length;
for (const suite of failedSuites) console.error(`suite failed to run: ${suite.name}\n${suite.message}`);
console.log(`${report.numPassedTests} passed, ${failed} failed, ${skipped} skipped`);
if (report.numTotalTests === 0) {
  console.error('no test ran');
  process.exit(1);
}
if (failed > 0 || (process.env.CI === 'true' && skipped > 0)) process.exit(1);
