//! The protocol's constants: magics, handshake and transmission flags, option, reply,
//! info, command and chunk numbers, error values, and the bounds every decoder applies.

/// `NBDMAGIC`: the first 8 bytes the server sends.
pub const NBD_MAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: the newstyle magic, sent by the server after [`NBD_MAGIC`] and by the
/// client before every option.
pub const IHAVEOPT_MAGIC: u64 = 0x4948_4156_454F_5054;
/// The magic of every option reply.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// `NBD_REQUEST_MAGIC`.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// `NBD_SIMPLE_REPLY_MAGIC`.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// `NBD_STRUCTURED_REPLY_MAGIC`.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

/// The IANA port of NBD.
pub const NBD_DEFAULT_PORT: u16 = 10809;

/// Handshake flag `NBD_FLAG_FIXED_NEWSTYLE` (bit 0).
pub const HANDSHAKE_FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flag `NBD_FLAG_NO_ZEROES` (bit 1).
pub const HANDSHAKE_FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flag `NBD_FLAG_C_FIXED_NEWSTYLE` (bit 0).
pub const CLIENT_FLAG_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flag `NBD_FLAG_C_NO_ZEROES` (bit 1).
pub const CLIENT_FLAG_NO_ZEROES: u32 = 1 << 1;

/// Transmission flag `NBD_FLAG_HAS_FLAGS` (bit 0, always set).
pub const TRANSMISSION_FLAG_HAS_FLAGS: u16 = 1 << 0;
/// Transmission flag `NBD_FLAG_READ_ONLY`.
pub const TRANSMISSION_FLAG_READ_ONLY: u16 = 1 << 1;
/// Transmission flag `NBD_FLAG_SEND_FLUSH`.
pub const TRANSMISSION_FLAG_SEND_FLUSH: u16 = 1 << 2;
/// Transmission flag `NBD_FLAG_SEND_FUA`.
pub const TRANSMISSION_FLAG_SEND_FUA: u16 = 1 << 3;
/// Transmission flag `NBD_FLAG_ROTATIONAL`.
pub const TRANSMISSION_FLAG_ROTATIONAL: u16 = 1 << 4;
/// Transmission flag `NBD_FLAG_SEND_TRIM`.
pub const TRANSMISSION_FLAG_SEND_TRIM: u16 = 1 << 5;
/// Transmission flag `NBD_FLAG_SEND_WRITE_ZEROES` (also exposes `NBD_CMD_FLAG_NO_HOLE`).
pub const TRANSMISSION_FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
/// Transmission flag `NBD_FLAG_SEND_DF`.
pub const TRANSMISSION_FLAG_SEND_DF: u16 = 1 << 7;
/// Transmission flag `NBD_FLAG_CAN_MULTI_CONN`.
pub const TRANSMISSION_FLAG_CAN_MULTI_CONN: u16 = 1 << 8;
/// Transmission flag `NBD_FLAG_SEND_RESIZE` (experimental extension; never set here).
pub const TRANSMISSION_FLAG_SEND_RESIZE: u16 = 1 << 9;
/// Transmission flag `NBD_FLAG_SEND_CACHE`.
pub const TRANSMISSION_FLAG_SEND_CACHE: u16 = 1 << 10;
/// Transmission flag `NBD_FLAG_SEND_FAST_ZERO`.
pub const TRANSMISSION_FLAG_SEND_FAST_ZERO: u16 = 1 << 11;

/// `NBD_OPT_EXPORT_NAME`.
pub const OPT_EXPORT_NAME: u32 = 1;
/// `NBD_OPT_ABORT`.
pub const OPT_ABORT: u32 = 2;
/// `NBD_OPT_LIST`.
pub const OPT_LIST: u32 = 3;
/// `NBD_OPT_PEEK_EXPORT` (withdrawn).
pub const OPT_PEEK_EXPORT: u32 = 4;
/// `NBD_OPT_STARTTLS`.
pub const OPT_STARTTLS: u32 = 5;
/// `NBD_OPT_INFO`.
pub const OPT_INFO: u32 = 6;
/// `NBD_OPT_GO`.
pub const OPT_GO: u32 = 7;
/// `NBD_OPT_STRUCTURED_REPLY`.
pub const OPT_STRUCTURED_REPLY: u32 = 8;
/// `NBD_OPT_LIST_META_CONTEXT`.
pub const OPT_LIST_META_CONTEXT: u32 = 9;
/// `NBD_OPT_SET_META_CONTEXT`.
pub const OPT_SET_META_CONTEXT: u32 = 10;
/// `NBD_OPT_EXTENDED_HEADERS` (experimental extension; answered unsupported here).
pub const OPT_EXTENDED_HEADERS: u32 = 11;

/// `NBD_REP_ACK`.
pub const REP_ACK: u32 = 1;
/// `NBD_REP_SERVER`.
pub const REP_SERVER: u32 = 2;
/// `NBD_REP_INFO`.
pub const REP_INFO: u32 = 3;
/// `NBD_REP_META_CONTEXT`.
pub const REP_META_CONTEXT: u32 = 4;
/// Bit 31: every error reply type has it.
pub const REP_FLAG_ERROR: u32 = 1 << 31;
/// `NBD_REP_ERR_UNSUP`.
pub const REP_ERR_UNSUP: u32 = REP_FLAG_ERROR | 1;
/// `NBD_REP_ERR_POLICY`.
pub const REP_ERR_POLICY: u32 = REP_FLAG_ERROR | 2;
/// `NBD_REP_ERR_INVALID`.
pub const REP_ERR_INVALID: u32 = REP_FLAG_ERROR | 3;
/// `NBD_REP_ERR_PLATFORM`.
pub const REP_ERR_PLATFORM: u32 = REP_FLAG_ERROR | 4;
/// `NBD_REP_ERR_TLS_REQD`.
pub const REP_ERR_TLS_REQD: u32 = REP_FLAG_ERROR | 5;
/// `NBD_REP_ERR_UNKNOWN`.
pub const REP_ERR_UNKNOWN: u32 = REP_FLAG_ERROR | 6;
/// `NBD_REP_ERR_SHUTDOWN`.
pub const REP_ERR_SHUTDOWN: u32 = REP_FLAG_ERROR | 7;
/// `NBD_REP_ERR_BLOCK_SIZE_REQD`.
pub const REP_ERR_BLOCK_SIZE_REQD: u32 = REP_FLAG_ERROR | 8;
/// `NBD_REP_ERR_TOO_BIG`.
pub const REP_ERR_TOO_BIG: u32 = REP_FLAG_ERROR | 9;

/// `NBD_INFO_EXPORT`.
pub const INFO_EXPORT: u16 = 0;
/// `NBD_INFO_NAME`.
pub const INFO_NAME: u16 = 1;
/// `NBD_INFO_DESCRIPTION`.
pub const INFO_DESCRIPTION: u16 = 2;
/// `NBD_INFO_BLOCK_SIZE`.
pub const INFO_BLOCK_SIZE: u16 = 3;

/// `NBD_CMD_READ`.
pub const CMD_READ: u16 = 0;
/// `NBD_CMD_WRITE`.
pub const CMD_WRITE: u16 = 1;
/// `NBD_CMD_DISC`.
pub const CMD_DISC: u16 = 2;
/// `NBD_CMD_FLUSH`.
pub const CMD_FLUSH: u16 = 3;
/// `NBD_CMD_TRIM`.
pub const CMD_TRIM: u16 = 4;
/// `NBD_CMD_CACHE`.
pub const CMD_CACHE: u16 = 5;
/// `NBD_CMD_WRITE_ZEROES`.
pub const CMD_WRITE_ZEROES: u16 = 6;
/// `NBD_CMD_BLOCK_STATUS`.
pub const CMD_BLOCK_STATUS: u16 = 7;

/// Command flag `NBD_CMD_FLAG_FUA`.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
/// Command flag `NBD_CMD_FLAG_NO_HOLE`.
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
/// Command flag `NBD_CMD_FLAG_DF`.
pub const CMD_FLAG_DF: u16 = 1 << 2;
/// Command flag `NBD_CMD_FLAG_REQ_ONE`.
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;
/// Command flag `NBD_CMD_FLAG_FAST_ZERO`.
pub const CMD_FLAG_FAST_ZERO: u16 = 1 << 4;

/// Structured reply flag `NBD_REPLY_FLAG_DONE`.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;

/// `NBD_REPLY_TYPE_NONE`.
pub const REPLY_TYPE_NONE: u16 = 0;
/// `NBD_REPLY_TYPE_OFFSET_DATA`.
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
/// `NBD_REPLY_TYPE_OFFSET_HOLE`.
pub const REPLY_TYPE_OFFSET_HOLE: u16 = 2;
/// `NBD_REPLY_TYPE_BLOCK_STATUS`.
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
/// Bit 15: every error chunk type has it.
pub const REPLY_TYPE_FLAG_ERROR: u16 = 1 << 15;
/// `NBD_REPLY_TYPE_ERROR`.
pub const REPLY_TYPE_ERROR: u16 = REPLY_TYPE_FLAG_ERROR | 1;
/// `NBD_REPLY_TYPE_ERROR_OFFSET`.
pub const REPLY_TYPE_ERROR_OFFSET: u16 = REPLY_TYPE_FLAG_ERROR | 2;

/// `NBD_STATE_HOLE` of `base:allocation`.
pub const STATE_HOLE: u32 = 1 << 0;
/// `NBD_STATE_ZERO` of `base:allocation`.
pub const STATE_ZERO: u32 = 1 << 1;

/// The one metadata context defined by the specification.
pub const META_CONTEXT_BASE_ALLOCATION: &str = "base:allocation";

/// `NBD_EPERM`.
pub const NBD_EPERM: u32 = 1;
/// `NBD_EIO`.
pub const NBD_EIO: u32 = 5;
/// `NBD_ENOMEM`.
pub const NBD_ENOMEM: u32 = 12;
/// `NBD_EINVAL`.
pub const NBD_EINVAL: u32 = 22;
/// `NBD_ENOSPC`.
pub const NBD_ENOSPC: u32 = 28;
/// `NBD_EOVERFLOW`.
pub const NBD_EOVERFLOW: u32 = 75;
/// `NBD_ENOTSUP`.
pub const NBD_ENOTSUP: u32 = 95;
/// `NBD_ESHUTDOWN`.
pub const NBD_ESHUTDOWN: u32 = 108;

/// Longest string (export name, description, query, error message): the specification's
/// "MUST be no longer than 4096 bytes".
pub const MAX_STRING_BYTES: usize = 4096;
/// Longest option data accepted (an option is skipped whole only within this bound; a
/// longer one ends the connection, a denial of service by the specification's rule).
pub const MAX_OPTION_DATA_BYTES: usize = 64 * 1024;
/// Longest option reply data accepted by a client.
pub const MAX_OPTION_REPLY_BYTES: usize = 64 * 1024;
/// Most information requests in one `NBD_OPT_INFO`/`NBD_OPT_GO`.
pub const MAX_INFO_REQUESTS: usize = 64;
/// Most queries in one `NBD_OPT_LIST_META_CONTEXT`/`NBD_OPT_SET_META_CONTEXT`.
pub const MAX_META_CONTEXT_QUERIES: usize = 128;
/// Largest request or reply payload: 2^25 bytes (32 MiB), the size the specification
/// says SHOULD NOT be considered a denial of service.
pub const MAX_PAYLOAD_BYTES: u32 = 32 * 1024 * 1024;
/// Most extents in one block status chunk (the specification's 2^20).
pub const MAX_BLOCK_STATUS_EXTENTS: usize = 1 << 20;
/// Length of a transmission request header.
pub const REQUEST_HEADER_BYTES: usize = 28;
/// Length of a simple reply header.
pub const SIMPLE_REPLY_HEADER_BYTES: usize = 16;
/// Length of a structured reply chunk header.
pub const STRUCTURED_REPLY_HEADER_BYTES: usize = 20;
/// Length of an option header (magic, option, length).
pub const OPTION_HEADER_BYTES: usize = 16;
/// Length of an option reply header (magic, option, type, length).
pub const OPTION_REPLY_HEADER_BYTES: usize = 20;
/// Length of the server's first message (NBDMAGIC, IHAVEOPT, handshake flags).
pub const SERVER_GREETING_BYTES: usize = 18;
/// Bytes of zeroes after an `NBD_OPT_EXPORT_NAME` answer unless `NO_ZEROES` was agreed.
pub const EXPORT_NAME_PADDING_BYTES: usize = 124;
