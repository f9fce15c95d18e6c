//! The GSS-API calls this crate makes itself, on owned handles (RAII): names, credentials and
//! security contexts, the per-message calls, and the export of an established context's keys
//! (MIT's "lucid" context) for our own RFC 4121 layer. `libgssapi`'s types keep their raw
//! handles private, and the lucid export needs the context handle; so the contexts live here.
//!
//! Every `unsafe` block of the Kerberos code is in this module.

use std::ffi::c_void;
use std::ptr;
use std::sync::Arc;

use libgssapi_sys as sys;

/// A failed GSS-API call: its major and minor status.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GssFailure {
    pub major: u32,
    pub minor: u32,
}

impl std::fmt::Display for GssFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // libgssapi's text for the pair (gss_display_status of both), which today's error
        // messages carry.
        let e = libgssapi::error::Error {
            major: libgssapi::error::MajorFlags::from_bits_retain(self.major),
            minor: self.minor,
        };
        f.write_str(e.to_string().trim())
    }
}

fn is_error(major: u32) -> bool {
    // The calling and routine error fields (RFC 2744 §3.9.1); the supplementary bits are not
    // errors.
    major & 0xffff_0000 != 0
}

/// `1.2.840.113554.1.2.2.1`, `GSS_KRB5_NT_PRINCIPAL_NAME`: a name is a Kerberos principal as
/// written, `svc/host@REALM`.
pub(crate) const KRB5_NT_PRINCIPAL_OID: [u8; 10] =
    [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02, 0x01];
/// `1.2.840.113554.1.2.2`, the Kerberos V5 mechanism.
pub(crate) const KRB5_MECH_OID: [u8; 9] = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02];
/// `GSS_KRB5_EXPORT_LUCID_SEC_CONTEXT_OID` (`1.2.840.113554.1.2.2.5.6`) with the version arc 1
/// appended (`gssapi_krb5.h`; `krb5_gss_glue.c` composes the same OID for
/// `gss_krb5_export_lucid_sec_context`).
const LUCID_V1_OID: [u8; 12] = [
    0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02, 0x05, 0x06, 0x01,
];

fn oid(bytes: &'static [u8]) -> sys::gss_OID_desc_struct {
    sys::gss_OID_desc_struct {
        length: bytes.len() as u32,
        // GSS only reads an OID's bytes (the `*mut` is the C API's lack of const).
        elements: bytes.as_ptr() as *mut c_void,
    }
}

/// An imported name, released on drop.
pub(crate) struct NameHandle(sys::gss_name_t);

// SAFETY: a name is an immutable value once imported; GSS only reads it (as a target or the
// credential's principal), and it is released once, by its owner.
unsafe impl Send for NameHandle {}

impl NameHandle {
    /// `principal` imported as a Kerberos principal name.
    pub fn principal(principal: &str) -> Result<NameHandle, GssFailure> {
        let mut name_oid = oid(&KRB5_NT_PRINCIPAL_OID);
        let mut buf = sys::gss_buffer_desc_struct {
            length: principal.len(),
            value: principal.as_ptr() as *mut c_void,
        };
        let (mut minor, mut name) = (0u32, ptr::null_mut());
        // GSS only reads the buffer and OID and writes the new name into `name`.
        // SAFETY: every pointer is to a live local of the type the C signature names.
        let major = unsafe { sys::gss_import_name(&mut minor, &mut buf, &mut name_oid, &mut name) };
        if is_error(major) || name.is_null() {
            return Err(GssFailure { major, minor });
        }
        Ok(NameHandle(name))
    }

    pub fn raw(&self) -> sys::gss_name_t {
        self.0
    }

    /// `gss_display_name`: the name as text.
    fn display(&self) -> Result<String, GssFailure> {
        let mut out = sys::gss_buffer_desc_struct {
            length: 0,
            value: ptr::null_mut(),
        };
        let mut minor = 0u32;
        // SAFETY: `self.0` is a live name; `out` receives a buffer GSS allocates, released
        // below; the name type is not asked for.
        let major = unsafe { sys::gss_display_name(&mut minor, self.0, &mut out, ptr::null_mut()) };
        if is_error(major) {
            return Err(GssFailure { major, minor });
        }
        let text = buffer_bytes(&out).map(|b| String::from_utf8_lossy(b).into_owned());
        release_buffer(&mut out);
        Ok(text.unwrap_or_default())
    }
}

impl Drop for NameHandle {
    fn drop(&mut self) {
        let mut minor = 0u32;
        // SAFETY: `self.0` was imported (or returned) by GSS and is released exactly once.
        unsafe { sys::gss_release_name(&mut minor, &mut self.0) };
    }
}

/// The bytes of a buffer GSS filled (`None` when empty).
fn buffer_bytes(b: &sys::gss_buffer_desc_struct) -> Option<&[u8]> {
    if b.value.is_null() || b.length == 0 {
        return None;
    }
    // SAFETY: GSS returned `length` readable bytes at `value`, alive until the buffer is
    // released (the borrow of `b` keeps the caller from releasing it meanwhile).
    Some(unsafe { std::slice::from_raw_parts(b.value as *const u8, b.length) })
}

fn release_buffer(b: &mut sys::gss_buffer_desc_struct) {
    if b.value.is_null() {
        return;
    }
    let mut minor = 0u32;
    // SAFETY: `b` is a buffer GSS allocated and is released once (then emptied).
    unsafe { sys::gss_release_buffer(&mut minor, b) };
    b.value = ptr::null_mut();
    b.length = 0;
}

/// A credential handle, released when the last clone drops.
#[derive(Clone)]
pub(crate) struct Cred(Arc<CredHandle>);

struct CredHandle(sys::gss_cred_id_t);

// SAFETY: MIT's credential handles may be used from several threads at once (contexts only
// read them; ticket caches lock themselves), as `libgssapi`'s `Cred` also promises.
unsafe impl Send for CredHandle {}
// SAFETY: as above.
unsafe impl Sync for CredHandle {}

impl Drop for CredHandle {
    fn drop(&mut self) {
        let mut minor = 0u32;
        // SAFETY: `self.0` was acquired by GSS and is released exactly once.
        unsafe { sys::gss_release_cred(&mut minor, &mut self.0) };
    }
}

/// `Accept` or `Initiate`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Usage {
    Initiate,
    Accept,
}

impl Cred {
    /// `gss_acquire_cred` for `name` (`None`: the default principal) and the Kerberos mechanism.
    pub fn acquire(name: Option<&NameHandle>, usage: Usage) -> Result<Cred, GssFailure> {
        Self::acquire_from(name, usage, &[])
    }

    /// `gss_acquire_cred_from` with an explicit credential store (`keytab`, `client_keytab`,
    /// `ccache`, ...); an empty store is `gss_acquire_cred`.
    pub fn acquire_from(
        name: Option<&NameHandle>,
        usage: Usage,
        store: &[(&std::ffi::CStr, &std::ffi::CStr)],
    ) -> Result<Cred, GssFailure> {
        let mut mech_oid = oid(&KRB5_MECH_OID);
        let mut mechs = sys::gss_OID_set_desc_struct {
            count: 1,
            elements: &mut mech_oid,
        };
        let usage = match usage {
            Usage::Initiate => sys::GSS_C_INITIATE,
            Usage::Accept => sys::GSS_C_ACCEPT,
        } as sys::gss_cred_usage_t;
        let name = name.map_or(ptr::null_mut(), NameHandle::raw);
        let (mut minor, mut cred) = (0u32, ptr::null_mut());
        let major = if store.is_empty() {
            // `mechs` is only read; `cred` receives a new handle or stays null; actual mechs
            // and time are not asked for.
            // SAFETY: `name` is a live name or null (the default); every pointer is to a live
            // local.
            unsafe {
                sys::gss_acquire_cred(
                    &mut minor,
                    name,
                    sys::_GSS_C_INDEFINITE,
                    &mut mechs,
                    usage,
                    &mut cred,
                    ptr::null_mut(),
                    ptr::null_mut(),
                )
            }
        } else {
            let mut elements: Vec<sys::gss_key_value_element_struct> = store
                .iter()
                .map(|(k, v)| sys::gss_key_value_element_struct {
                    key: k.as_ptr(),
                    value: v.as_ptr(),
                })
                .collect();
            let set = sys::gss_key_value_set_struct {
                count: elements.len() as u32,
                elements: elements.as_mut_ptr(),
            };
            // `mechs`, `set` (and the elements and C strings it points to, borrowed for this
            // call) are only read; `cred` receives a new handle or stays null.
            // SAFETY: `name` is a live name or null; every other pointer is to a live local.
            unsafe {
                sys::gss_acquire_cred_from(
                    &mut minor,
                    name,
                    sys::_GSS_C_INDEFINITE,
                    &mut mechs,
                    usage,
                    &set,
                    &mut cred,
                    ptr::null_mut(),
                    ptr::null_mut(),
                )
            }
        };
        if is_error(major) || cred.is_null() {
            return Err(GssFailure { major, minor });
        }
        Ok(Cred(Arc::new(CredHandle(cred))))
    }

    fn raw(&self) -> sys::gss_cred_id_t {
        self.0 .0
    }
}

/// A security context (initiating or accepting), deleted on drop. Used by one thread at a time
/// (`&mut self` for every call that may change it).
pub(crate) struct Context {
    ctx: sys::gss_ctx_id_t,
    established: bool,
    failed: Option<GssFailure>,
    /// A copy of the token `gss_unwrap` is given: MIT's RFC 4121 unwrap rotates the token and
    /// zeroes its EC and RRC in place (`k5unsealv3.c`), so it must not see the caller's `&[u8]`.
    scratch: Vec<u8>,
}

// SAFETY: a context may move between threads; it is never used from two at once (every call
// takes `&mut self`, or `&self` on a value that is not `Sync`).
unsafe impl Send for Context {}

impl Drop for Context {
    fn drop(&mut self) {
        if self.ctx.is_null() {
            return;
        }
        let mut minor = 0u32;
        // SAFETY: `self.ctx` is a context GSS created and is deleted exactly once; no output
        // token is asked for.
        unsafe { sys::gss_delete_sec_context(&mut minor, &mut self.ctx, ptr::null_mut()) };
    }
}

/// The initiator's request flags: mutual authentication, confidentiality and integrity,
/// replay and sequence detection, no delegation (the JDK's GSSAPI client's).
pub(crate) const INIT_FLAGS: u32 = sys::GSS_C_MUTUAL_FLAG
    | sys::GSS_C_CONF_FLAG
    | sys::GSS_C_INTEG_FLAG
    | sys::GSS_C_REPLAY_FLAG
    | sys::GSS_C_SEQUENCE_FLAG;

fn empty_buffer() -> sys::gss_buffer_desc_struct {
    sys::gss_buffer_desc_struct {
        length: 0,
        value: ptr::null_mut(),
    }
}

/// The supplementary statuses of a token out of sequence (RFC 2744 §3.9.1).
const SEQUENCE_PROBLEMS: u32 = sys::GSS_S_DUPLICATE_TOKEN
    | sys::GSS_S_OLD_TOKEN
    | sys::GSS_S_UNSEQ_TOKEN
    | sys::GSS_S_GAP_TOKEN;

fn input_buffer(b: &[u8]) -> sys::gss_buffer_desc_struct {
    sys::gss_buffer_desc_struct {
        length: b.len(),
        // GSS only reads an input token.
        value: b.as_ptr() as *mut c_void,
    }
}

impl Context {
    pub fn new() -> Context {
        Context {
            ctx: ptr::null_mut(),
            established: false,
            failed: None,
            scratch: Vec::new(),
        }
    }

    pub fn is_established(&self) -> bool {
        self.established
    }

    /// Takes the output token of a step and records its status.
    fn finish_step(
        &mut self,
        major: u32,
        minor: u32,
        out: &mut sys::gss_buffer_desc_struct,
    ) -> Result<Vec<u8>, GssFailure> {
        let tok = buffer_bytes(out).map(<[u8]>::to_vec).unwrap_or_default();
        release_buffer(out);
        if is_error(major) {
            let f = GssFailure { major, minor };
            self.failed = Some(f);
            return Err(f);
        }
        if major & sys::GSS_S_CONTINUE_NEEDED == 0 {
            self.established = true;
        }
        Ok(tok)
    }

    /// One `gss_init_sec_context` step (`input` `None` on the first). Once established, a
    /// further step returns no token; after a failure, the failure again.
    pub fn init_step(
        &mut self,
        cred: &Cred,
        target: &NameHandle,
        input: Option<&[u8]>,
    ) -> Result<Vec<u8>, GssFailure> {
        if let Some(f) = self.failed {
            return Err(f);
        }
        if self.established {
            return Ok(Vec::new());
        }
        let mut mech = oid(&KRB5_MECH_OID);
        let mut inb = input.map(input_buffer);
        let mut out = empty_buffer();
        let mut minor = 0u32;
        // GSS reads `cred`, `target`, `mech` and the input token, updates `self.ctx` and
        // writes a new output token into `out` (released in `finish_step`); no channel
        // bindings, actual mech, returned flags or time.
        // SAFETY: `cred` and `target` are live handles; `self.ctx` is null or a context this
        // call made; every other pointer is to a live local or null.
        let major = unsafe {
            sys::gss_init_sec_context(
                &mut minor,
                cred.raw(),
                &mut self.ctx,
                target.raw(),
                &mut mech,
                INIT_FLAGS,
                sys::_GSS_C_INDEFINITE,
                ptr::null_mut(),
                inb.as_mut().map_or(ptr::null_mut(), |b| b as *mut _),
                ptr::null_mut(),
                &mut out,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        self.finish_step(major, minor, &mut out)
    }

    /// One `gss_accept_sec_context` step with `cred`.
    pub fn accept_step(&mut self, cred: &Cred, input: &[u8]) -> Result<Vec<u8>, GssFailure> {
        if let Some(f) = self.failed {
            return Err(f);
        }
        if self.established {
            return Ok(Vec::new());
        }
        let mut inb = input_buffer(input);
        let mut out = empty_buffer();
        let mut minor = 0u32;
        // GSS reads `cred` and the input token, updates `self.ctx` and writes a new output
        // token into `out` (released in `finish_step`); no channel bindings, source name,
        // mech, flags, time or delegated credential are asked for.
        // SAFETY: `cred` is a live handle; `self.ctx` is null or a context this call made;
        // every other pointer is to a live local or null.
        let major = unsafe {
            sys::gss_accept_sec_context(
                &mut minor,
                &mut self.ctx,
                cred.raw(),
                &mut inb,
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
                &mut out,
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        self.finish_step(major, minor, &mut out)
    }

    /// The context's initiator (`gss_inquire_context`'s source name), as text.
    pub fn source_name(&self) -> Result<String, GssFailure> {
        let (mut minor, mut name) = (0u32, ptr::null_mut());
        // Only the source name is asked for; it is released by the `NameHandle` below.
        // SAFETY: `self.ctx` is a live context (or null: GSS then fails, NO_CONTEXT); every
        // other pointer is to a live local or null.
        let major = unsafe {
            sys::gss_inquire_context(
                &mut minor,
                self.ctx,
                &mut name,
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        if is_error(major) || name.is_null() {
            return Err(GssFailure { major, minor });
        }
        NameHandle(name).display()
    }

    /// `gss_wrap(conf_req = confidential, qop 0)` of `plain`, appended to `out`.
    pub fn wrap(
        &mut self,
        confidential: bool,
        plain: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), GssFailure> {
        let mut inb = input_buffer(plain);
        let mut tok = empty_buffer();
        let mut minor = 0u32;
        // GSS reads the input and writes a new token into `tok`, released below.
        // SAFETY: `self.ctx` is a live context (or null: GSS fails); every pointer is to a
        // live local or null.
        let major = unsafe {
            sys::gss_wrap(
                &mut minor,
                self.ctx,
                i32::from(confidential),
                0,
                &mut inb,
                ptr::null_mut(),
                &mut tok,
            )
        };
        if !is_error(major) {
            out.extend_from_slice(buffer_bytes(&tok).unwrap_or_default());
        }
        release_buffer(&mut tok);
        if is_error(major) {
            return Err(GssFailure { major, minor });
        }
        Ok(())
    }

    /// `gss_unwrap(token)`, appended to `out`; returns its `conf_state` (the token was sealed).
    pub fn unwrap(&mut self, token: &[u8], out: &mut Vec<u8>) -> Result<bool, GssFailure> {
        self.scratch.clear();
        self.scratch.extend_from_slice(token);
        let mut inb = sys::gss_buffer_desc_struct {
            length: self.scratch.len(),
            value: self.scratch.as_mut_ptr().cast(),
        };
        let mut plain = empty_buffer();
        let mut minor = 0u32;
        let mut conf_state: std::os::raw::c_int = 0;
        // GSS reads (and may rewrite) the token copy in `self.scratch` and writes a new buffer
        // into `plain`, released below.
        // SAFETY: `self.ctx` is live (or null: GSS fails); `inb` points to `self.scratch`, writable
        // and unborrowed for the call; every other pointer is a live local or null.
        let major = unsafe {
            sys::gss_unwrap(
                &mut minor,
                self.ctx,
                &mut inb,
                &mut plain,
                &mut conf_state,
                ptr::null_mut(),
            )
        };
        // A replayed, old, out-of-order or skipped token is only a supplementary status to
        // GSS; on a TCP connection it is an error, as in our own layer.
        let bad = is_error(major) || major & SEQUENCE_PROBLEMS != 0;
        if !bad {
            out.extend_from_slice(buffer_bytes(&plain).unwrap_or_default());
        }
        release_buffer(&mut plain);
        if bad {
            return Err(GssFailure { major, minor });
        }
        Ok(conf_state != 0)
    }

    /// The established context's keys and sequence numbers (MIT's lucid context, version 1),
    /// copied. `gss_inquire_sec_context_by_oid` with the lucid OID leaves the context usable
    /// (unlike `gss_krb5_export_lucid_sec_context`, which deletes it after the same inquiry);
    /// the lucid structure it returns is freed here with `gss_krb5_free_lucid_sec_context`.
    pub fn lucid(&self) -> Result<Lucid, String> {
        if !self.established {
            return Err("the context is not established".into());
        }
        let mut req = oid(&LUCID_V1_OID);
        let (mut minor, mut set) = (0u32, ptr::null_mut::<sys::gss_buffer_set_desc_struct>());
        // GSS reads the OID and returns a buffer set (released below) holding one pointer.
        // SAFETY: `self.ctx` is a live, established context; the other pointers are to live
        // locals.
        let major = unsafe {
            sys::gss_inquire_sec_context_by_oid(&mut minor, self.ctx, &mut req, &mut set)
        };
        if is_error(major) {
            return Err(format!(
                "gss_inquire_sec_context_by_oid(lucid v1): {}",
                GssFailure { major, minor }
            ));
        }
        // The one element's bytes are a `gss_krb5_lucid_context_v1_t *` (lucid_context.c).
        let lctx: *mut LucidV1 = {
            let ok = !set.is_null()
                // SAFETY: `set` is the non-null buffer set GSS just returned.
                && unsafe { (*set).count == 1 && (*(*set).elements).length == size_of::<*mut c_void>() };
            let p = if ok {
                // SAFETY: the element holds exactly one pointer's bytes (checked above), not
                // necessarily aligned.
                unsafe { ((*(*set).elements).value as *const *mut LucidV1).read_unaligned() }
            } else {
                ptr::null_mut()
            };
            let mut m2 = 0u32;
            // SAFETY: `set` is the buffer set GSS returned (or null), released once; the lucid
            // structure it pointed to is not freed by this.
            unsafe { sys::gss_release_buffer_set(&mut m2, &mut set) };
            if p.is_null() {
                return Err("the lucid context export returned no context".into());
            }
            p
        };
        // SAFETY: `lctx` is MIT's v1 struct (`gss_krb5_lucid_context_v1_t`, mirrored by
        // `LucidV1`), alive until freed below; each key buffer it points to holds `length` bytes.
        let copied = unsafe {
            let l = &*lctx;
            if l.version != 1 {
                Err(format!("lucid context version {}", l.version))
            } else {
                let key = |k: &LucidKey| Key {
                    enctype: k.typ as i32,
                    bytes: if k.data.is_null() {
                        Vec::new()
                    } else {
                        std::slice::from_raw_parts(k.data as *const u8, k.length as usize).to_vec()
                    },
                };
                Ok(Lucid {
                    initiator: l.initiate != 0,
                    send_seq: l.send_seq,
                    recv_seq: l.recv_seq,
                    protocol: l.protocol,
                    ctx_key: if l.protocol == 1 {
                        key(&l.cfx.ctx_key)
                    } else {
                        key(&l.rfc1964.ctx_key)
                    },
                    acceptor_subkey: (l.protocol == 1 && l.cfx.have_acceptor_subkey != 0)
                        .then(|| key(&l.cfx.acceptor_subkey)),
                })
            }
        };
        let mut m3 = 0u32;
        // SAFETY: `lctx` is the lucid context GSS returned, freed exactly once.
        unsafe { gss_krb5_free_lucid_sec_context(&mut m3, lctx.cast()) };
        copied
    }
}

#[link(name = "gssapi_krb5")]
extern "C" {
    /// `gssapi_krb5.h`: frees a lucid context (not in `libgssapi-sys`' bindings).
    fn gss_krb5_free_lucid_sec_context(minor: *mut u32, kctx: *mut c_void) -> u32;
}

/// `gss_krb5_lucid_key_t`.
#[repr(C)]
struct LucidKey {
    typ: u32,
    length: u32,
    data: *mut c_void,
}

/// `gss_krb5_rfc1964_keydata_t`.
#[repr(C)]
struct Rfc1964KeyData {
    sign_alg: u32,
    seal_alg: u32,
    ctx_key: LucidKey,
}

/// `gss_krb5_cfx_keydata_t`.
#[repr(C)]
struct CfxKeyData {
    have_acceptor_subkey: u32,
    ctx_key: LucidKey,
    acceptor_subkey: LucidKey,
}

/// `gss_krb5_lucid_context_v1_t`.
#[repr(C)]
struct LucidV1 {
    version: u32,
    initiate: u32,
    endtime: u32,
    send_seq: u64,
    recv_seq: u64,
    protocol: u32,
    rfc1964: Rfc1964KeyData,
    cfx: CfxKeyData,
}

/// One key of a lucid context, copied (zeroed on drop).
pub(crate) struct Key {
    pub enctype: i32,
    pub bytes: Vec<u8>,
}

impl Drop for Key {
    fn drop(&mut self) {
        self.bytes.fill(0);
    }
}

/// What [`Context::lucid`] copies out.
pub(crate) struct Lucid {
    pub initiator: bool,
    pub send_seq: u64,
    pub recv_seq: u64,
    /// 0: RFC 1964 (DES, 3DES, RC4 tokens), 1: RFC 4121.
    pub protocol: u32,
    pub ctx_key: Key,
    pub acceptor_subkey: Option<Key>,
}
