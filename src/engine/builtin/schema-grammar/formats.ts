// JSON Schema string formats as grammar: the text between a string's quotes
// for each format OpenAI's structured outputs accept. Each grammar writes a
// plain, conservative subset of its format (lower-case hex, days 01-28,
// always "Z"), so what it writes passes both ajv-formats' check and the
// stricter patterns clients add beside the format (zod 4 sends its own
// email, uuid and date-time regexes with them). Apart from the schema walk
// because these are facts about formats, not about schemas.

const DIGIT = '[0-9]';
const HEX = '[0-9a-f]';
/** 01-28: every month has those days, so no date written is one a calendar lacks. */
const DAY = '("0" [1-9] | "1" [0-9] | "2" [0-8])';
const MONTH = '("0" [1-9] | "1" [0-2])';
/** Years 1000-2999: four digits, none before the Gregorian calendar's era of use. */
const YEAR = `[12] ${DIGIT}{3}`;
const DATE = `${YEAR} "-" ${MONTH} "-" ${DAY}`;
const TIME = `([01] ${DIGIT} | "2" [0-3]) ":" [0-5] ${DIGIT} ":" [0-5] ${DIGIT} ("." ${DIGIT}{1,3})? "Z"`;
const LABEL = `[a-z0-9] ([a-z0-9-]{0,20} [a-z0-9])?`;
const HOSTNAME = `${LABEL} ("." ${LABEL}){0,3}`;
const OCTET = `("25" [0-5] | "2" [0-4] ${DIGIT} | "1" ${DIGIT} ${DIGIT} | [1-9] ${DIGIT} | ${DIGIT})`;
const AMOUNT = `[1-9] ${DIGIT}{0,2}`;

/** Format name → GBNF for the string's content. Absent: the grammar cannot write that format, so answers are checked. */
export const FORMAT_GRAMMARS: Readonly<Record<string, string>> = {
  date: DATE,
  time: TIME,
  'date-time': `${DATE} "T" ${TIME}`,
  duration: `"P" (${AMOUNT} ("D" | "W") | "T" ${AMOUNT} ("H" | "M" | "S") | ${AMOUNT} "D" "T" ${AMOUNT} ("H" | "M" | "S"))`,
  email: `[a-z0-9]{1,16} ("." [a-z0-9]{1,16})? "@" ${LABEL} "." [a-z]{2,8}`,
  hostname: HOSTNAME,
  ipv4: `${OCTET} "." ${OCTET} "." ${OCTET} "." ${OCTET}`,
  ipv6: `${HEX}{1,4} (":" ${HEX}{1,4}){7}`,
  // Version 1-8 and the RFC 4122 variant: zod's uuid pattern asks for both.
  uuid: `${HEX}{8} "-" ${HEX}{4} "-" [1-8] ${HEX}{3} "-" [89ab] ${HEX}{3} "-" ${HEX}{12}`,
  uri: `"https://" ${HOSTNAME} "." [a-z]{2,8} ("/" [a-z0-9]{1,12}){0,3}`,
};
