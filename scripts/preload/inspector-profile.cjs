// A profile of the watched window (see window.cjs) through the inspector of this thread, written to
// BENCH_PROBE_PROFILE: the steps that start it ([method, params] each), and the method that stops it and answers
// `{ profile }`. A session on this thread answers synchronously, so the profile is written before the handler
// that stops it returns (the server's exit included).
const inspector = require('node:inspector');
const { writeFileSync } = require('node:fs');
const watchWindow = require('./window.cjs');

module.exports = function profileWindow(name, extension, startSteps, stopMethod) {
  const session = new inspector.Session();
  session.connect();
  const failed = (step, error) => process.stderr.write(`${name}: ${step} failed: ${error.message}\n`);
  watchWindow(
    () => {
      for (const [method, params] of startSteps) {
        session.post(method, params ?? {}, (error) => error && failed(method, error));
      }
    },
    () => {
      session.post(stopMethod, (error, result) => {
        if (error) failed(stopMethod, error);
        else
          writeFileSync(
            process.env.BENCH_PROBE_PROFILE ?? `server-${process.pid}.${extension}`,
            JSON.stringify(result.profile),
          );
      });
    },
  );
};
