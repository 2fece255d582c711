const encoder = new TextEncoder();

/** A FormData of these fields, in this order. */
export const form = (...entries: [string, string | Blob][]): FormData => {
  const data = new FormData();
  for (const [name, value] of entries) data.append(name, value);
  return data;
};

/** A ReadableStream of these chunks (UTF-8), closed after the last. */
export const streamOf = (...chunks: string[]): ReadableStream<Uint8Array> =>
  new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
      controller.close();
    },
  });
