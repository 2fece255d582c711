// express@4 installed under an alias for the tests; its API is what @types/express describes for v5 closely
// enough for the test app, which treats both through the same factory type.
declare module 'express4' {
  const express: unknown;
  export default express;
}
