// The window a preload watches: from the first SIGUSR2 the server gets to the second (scripts/probe.ts sends them
// around the measured load), or to the server's exit if no second one comes.
module.exports = function watchWindow(start, stop) {
  let state = 'before';
  process.on('SIGUSR2', () => {
    if (state === 'before') {
      state = 'watching';
      start();
    } else if (state === 'watching') {
      state = 'done';
      stop();
    }
  });
  process.on('exit', () => {
    if (state === 'watching') {
      state = 'done';
      stop();
    }
  });
};
