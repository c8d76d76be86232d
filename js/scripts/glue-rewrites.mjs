// Rewrites of what wasm-bindgen generates, each checked against the
// shape it expects so a new wasm-bindgen cannot silently skip one.

function replaceOnce(text, from, to, what) {
  const count = text.split(from).length - 1;
  if (count < 1) throw new Error(`glue-rewrites: ${what}: expected ${JSON.stringify(from)} in the glue`);
  return text.replaceAll(from, to);
}

// A bundler that misses the "workerd" (or "node") export condition loads
// the web entry, which nobody initialised: every call then failed with
// "Cannot read properties of undefined (reading 'gatewaycore_new')". Until
// initSync runs, the module's exports object is a stand-in whose every
// property read throws an Error that says what to do instead.
const GUARD = `
const PACELINE_UNINITIALISED = new Proxy({}, {
    get() {
        const error = new Error(
            "paceline's WebAssembly module is not initialised. This is the package's web entry: " +
            "in Node, import \\"paceline\\" resolves to the Node entry, which loads it itself; in a Worker, " +
            "bundle with the \\"workerd\\" export condition (wrangler does; esbuild needs conditions: [\\"workerd\\"]); " +
            "anywhere else call initSync({ module }) (or await the default export) before using the package.",
        );
        error.name = "PacelineError";
        error.code = "INVALID_INPUT";
        throw error;
    },
});
`;

/** The generated glue with the "not initialised" stand-in in place of `undefined`. */
export function guardUninitialised(source) {
  let out = replaceOnce(
    source,
    "let wasmModule, wasmInstance, wasm;",
    "let wasmModule, wasmInstance, wasm = PACELINE_UNINITIALISED;",
    "the wasm exports variable",
  );
  out = replaceOnce(
    out,
    "if (wasm !== undefined) return wasm;",
    "if (wasm !== PACELINE_UNINITIALISED) return wasm;",
    "the init functions' already-initialised check",
  );
  const firstLineEnd = out.indexOf("\n") + 1;
  return out.slice(0, firstLineEnd) + GUARD + out.slice(firstLineEnd);
}

/**
 * The generated typings in camelCase and without `[Symbol.dispose]()`, which needs
 * `lib: esnext` (or es2025's disposable) to compile; the method itself
 * stays on every class at run time (the glue adds it where the host has
 * `Symbol.dispose`), and `free()` is the typed way to release.
 */
export function typingsForEs2022(source) {
  const out = replaceOnce(source, "    [Symbol.dispose](): void;\n", "", "the typings' Symbol.dispose members");
  // The init function's one snake_case parameter name, as every other
  // parameter is named (a name in a declaration changes nothing at run time).
  return replaceOnce(out, "(module_or_path?:", "(moduleOrPath?:", "the init function's parameter");
}

// A state class's token method (how createGovernor recognises a state made
// by this package) comes off the class: it would be public API there. What
// is left is one module-private function the wasm imports, which finds the
// token through the glue's brand maps, so only objects the glue made have
// one and a freed object has none.
const TOKEN_METHOD =
  /\n {4}\/\*\*\n(?: {5}\*.*\n)*? {5}\*\/\n {4}pacelineStateToken\(\) \{\n {8}const ret = wasm\.(\w+)\(pacelineReceiver\(this, (PACELINE_OWNED_\w+), "\w+"\)\);\n {8}return ret;\n {4}\}/g;

/**
 * The glue with every state's token method turned into `pacelineStateToken(value)`;
 * `expected` is how many state classes the module has.
 */
export function hideStateTokens(source, expected = 4) {
  const lookups = [];
  const out = source.replace(TOKEN_METHOD, (_, wasmFn, owned) => {
    lookups.push(`    ptr = ${owned}.get(value);\n    if (ptr) return wasm.${wasmFn}(ptr);`);
    return "";
  });
  if (lookups.length !== expected || out.includes("pacelineStateToken()")) {
    throw new Error(
      `glue-rewrites: expected ${expected} state token methods of the known shape, found ${lookups.length}`,
    );
  }
  return `${out}\nfunction pacelineStateToken(value) {\n    let ptr;\n${lookups.join("\n")}\n    return undefined;\n}\n`;
}
