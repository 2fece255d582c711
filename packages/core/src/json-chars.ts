/** Character codes of JSON's syntax, shared by the string and the byte readers (ASCII: the same in both). */
export const TAB = 0x09;
export const LINE_FEED = 0x0a;
export const RETURN = 0x0d;
export const SPACE = 0x20;
export const QUOTE = 0x22;
export const COMMA = 0x2c;
export const MINUS = 0x2d;
export const ZERO = 0x30;
export const NINE = 0x39;
export const COLON = 0x3a;
export const OPEN_BRACKET = 0x5b;
export const BACKSLASH = 0x5c;
export const CLOSE_BRACKET = 0x5d;
export const OPEN_BRACE = 0x7b;
export const CLOSE_BRACE = 0x7d;
