/** Splits a text stream into lines (without their `\n` or `\r\n`); the last unterminated line too. */
export class TextLineStream extends TransformStream<string, string> {
  constructor() {
    let buf = "";
    super({
      transform(chunk, controller) {
        buf += chunk;
        let i;
        while ((i = buf.indexOf("\n")) >= 0) {
          controller.enqueue(buf.slice(0, i).replace(/\r$/, ""));
          buf = buf.slice(i + 1);
        }
      },
      flush(controller) {
        if (buf !== "") controller.enqueue(buf.replace(/\r$/, ""));
      },
    });
  }
}
