/**
 * A gate a catalog transaction waits at while it is closed (pass `pass` as a `beforeCommit` hook); `entered`
 * resolves once one has reached it. Open by default.
 */
export function gate() {
  let open = () => {};
  let entered = () => {};
  const state = {
    wait: Promise.resolve(),
    entered: Promise.resolve(),
    close() {
      state.wait = new Promise<void>((resolve) => {
        open = resolve;
      });
      state.entered = new Promise<void>((resolve) => {
        entered = resolve;
      });
    },
    open: () => open(),
    pass: async () => {
      entered();
      await state.wait;
    },
  };
  return state;
}
