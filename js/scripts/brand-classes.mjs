// Brand checks for the classes wasm-bindgen generates. Its glue passes
// `this.__wbg_ptr` to the wasm unchecked, so
// `GatewayCore.prototype.acquire.call(new LocalRateState(), ...)` would
// hand one object's memory to another class's code, and `free()` on a
// look-alike would free someone else's. This rewrite keeps, per class, a
// WeakMap from each object the glue itself made to its pointer: methods
// take the pointer from there (never from the object's own properties) and
// refuse any other receiver with a coded INVALID_INPUT; `free()` forgets
// it, so a freed object is refused too (and a second `free()` is a no-op).

const HELPERS = `
function pacelineMisuse(message) {
    const error = new Error(message);
    error.name = "PacelineError";
    error.code = "INVALID_INPUT";
    return error;
}
function pacelineReceiver(self, owned, name) {
    const ptr = owned.get(self);
    if (ptr) return ptr;
    throw pacelineMisuse(ptr === 0
        ? \`this \${name} has been freed\`
        : \`this is not a \${name} made by paceline (a method was called on another object)\`);
}
function pacelineRelease(self, owned, name) {
    const ptr = owned.get(self);
    if (ptr === undefined) throw pacelineMisuse(\`free() was called on an object that is not a \${name}\`);
    owned.set(self, 0);
    return ptr;
}
`;

function count(text, pattern) {
  return (text.match(pattern) ?? []).length;
}

/** Rewrites one class body; throws if the glue's shape is not the one this expects. */
function brandClass(name, body) {
  const owned = `PACELINE_OWNED_${name}`;
  let out = body;
  // Where the glue makes an object (constructor, __wrap), record it.
  const made = /^(\s*)(this|obj)\.__wbg_ptr = (?!0;)([^;]+);$/gm;
  const makes = count(out, made);
  out = out.replace(
    made,
    (_, indent, who, value) =>
      `${indent}${who}.__wbg_ptr = ${value};\n${indent}${owned}.set(${who}, ${who}.__wbg_ptr);`,
  );
  // free(): the pointer comes from (and leaves) the brand map.
  const destroy = "const ptr = this.__wbg_ptr;\n        this.__wbg_ptr = 0;";
  if (!out.includes(destroy)) throw new Error(`brand-classes: ${name} has no __destroy_into_raw of the expected shape`);
  out = out.replace(destroy, `const ptr = pacelineRelease(this, ${owned}, "${name}");\n        this.__wbg_ptr = 0;`);
  // free() must release through this class's own check, not whatever
  // __destroy_into_raw the receiver carries.
  const free = "const ptr = this.__destroy_into_raw();";
  if (!out.includes(free)) throw new Error(`brand-classes: ${name} has no free() of the expected shape`);
  out = out.replace(free, `const ptr = ${name}.prototype.__destroy_into_raw.call(this);`);
  out = out.replace(/(\n\s*)(wasm\.__wbg_\w+_free\(ptr, 0\);)/, "$1if (ptr === 0) return;$1$2");
  // Every method call into the wasm.
  const calls = /wasm\.(\w+)\(this\.__wbg_ptr/g;
  const methodCalls = count(out, calls);
  out = out.replace(calls, `wasm.$1(pacelineReceiver(this, ${owned}, "${name}")`);
  // The reads left are the brand map's and the FinalizationRegistry's,
  // right where the object is made.
  const leftover = out
    .replace(/(Finalization\.register|\.set)\((this|obj), \2\.__wbg_ptr/g, "")
    .match(/this\.__wbg_ptr(?! = )/g);
  if (makes === 0 || methodCalls === 0 || leftover !== null) {
    throw new Error(`brand-classes: unexpected glue in class ${name} (makes ${makes}, calls ${methodCalls})`);
  }
  return `const ${owned} = new WeakMap();\n${out}`;
}

/** The generated glue with every exported class brand-checked. */
export function brandClasses(source) {
  const classes = /^export class (\w+) \{\n[\s\S]*?\n\}\n/gm;
  let branded = 0;
  const out = source.replace(classes, (block, name) => {
    branded++;
    return brandClass(name, block);
  });
  if (branded === 0) throw new Error("brand-classes: no exported class found in the glue");
  const firstLineEnd = out.indexOf("\n") + 1;
  return out.slice(0, firstLineEnd) + HELPERS + out.slice(firstLineEnd);
}
