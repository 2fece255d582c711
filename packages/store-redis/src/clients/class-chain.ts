/** The names of the classes an object was built from, nearest first. */
export function classNames(value: unknown): string[] {
  const names: string[] = [];
  let proto = typeof value === 'object' && value !== null ? Object.getPrototypeOf(value) : null;
  while (proto !== null && proto !== Object.prototype) {
    if (Object.hasOwn(proto, 'constructor') && typeof proto.constructor === 'function') {
      names.push(proto.constructor.name);
    }
    proto = Object.getPrototypeOf(proto);
  }
  return names;
}
