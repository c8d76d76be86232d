// A Durable Object's `state` with in-memory storage, so PacelineGateway runs
// in Node for tests and benchmarks: what the object stores, and when.

/**
 * `store` is the storage's map (pass one to restart an object over what an
 * earlier one stored); `puts` counts put calls and `written` the bytes they
 * carried; `ready` is what the object handed to `blockConcurrencyWhile`.
 * With `lateWrites`, writes settle a turn later, so a response that did not
 * wait for them is seen before they land.
 */
export function fakeDurableObjectState({ store = new Map(), lateWrites = false } = {}) {
  const turn = () => (lateWrites ? new Promise((resolve) => setImmediate(resolve)) : undefined);
  const state = {
    store,
    puts: 0,
    written: 0,
    ready: undefined,
    storage: {
      list: async () => new Map(store),
      put: async (entries) => {
        await turn();
        for (const [key, value] of Object.entries(entries)) {
          store.set(key, value.slice());
          state.written += key.length + value.byteLength;
        }
        state.puts += 1;
      },
      delete: async (keys) => {
        await turn();
        for (const key of [keys].flat()) store.delete(key);
      },
    },
    blockConcurrencyWhile(callback) {
      state.ready = callback();
      return state.ready;
    },
  };
  return state;
}
