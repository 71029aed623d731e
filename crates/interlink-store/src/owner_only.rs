//! Owner-only files and directories on Windows, where Unix uses modes 0600 and 0700.
//!
//! A new key file or private directory gets a protected DACL (no inherited entries)
//! granting full access to the current user and to SYSTEM, as OpenSSH for Windows
//! asks of a private key. A key file whose DACL lets anyone else in is refused, as a
//! group- or world-readable one is on Unix. ACLs are read and written as SDDL strings
//! (`D:P(A;;FA;;;<user SID>)(A;;FA;;;SY)`): the system parses and prints them, so no
//! ACL is walked by hand.

#[cfg(all(windows, test))]
pub(crate) use sys::{current_user_sid, set_dacl};
#[cfg(windows)]
pub(crate) use sys::{others_with_access, restrict};

/// Trustees that may hold access to a private file besides its user: the system
/// itself and local administrators (who can take any file anyway).
const ALSO_ALLOWED: &[&str] = &["SY", "BA"];

/// [`others_with_access`] over an SDDL string: the trustees of the allow entries that
/// are neither `user` nor [`ALSO_ALLOWED`], comma-separated.
#[cfg_attr(not(windows), allow(dead_code))]
pub(crate) fn others_in_sddl(sddl: &str, user: &str) -> Option<String> {
    let Some(dacl) = sddl.split_once("D:").map(|(_, d)| d) else {
        return Some("everyone (no access list)".to_owned());
    };
    if dacl.starts_with("NO_ACCESS_CONTROL") {
        return Some("everyone (no access list)".to_owned());
    }
    let others: Vec<&str> = dacl
        .split('(')
        .skip(1)
        .filter_map(|ace| {
            let fields: Vec<&str> = ace.trim_end_matches(')').split(';').collect();
            let (kind, trustee) = (*fields.first()?, *fields.get(5)?);
            let allows = kind == "A" || kind == "OA";
            (allows && trustee != user && !ALSO_ALLOWED.contains(&trustee)).then_some(trustee)
        })
        .collect();
    (!others.is_empty()).then(|| others.join(", "))
}

#[cfg(windows)]
mod sys {
    use std::{ffi::OsStr, io, os::windows::ffi::OsStrExt as _, path::Path, ptr};

    use windows_sys::Win32::{
        Foundation::{CloseHandle, HANDLE, HLOCAL, LocalFree},
        Security::{
            Authorization::{
                ConvertSecurityDescriptorToStringSecurityDescriptorW, ConvertSidToStringSidW,
                ConvertStringSecurityDescriptorToSecurityDescriptorW, SDDL_REVISION_1,
            },
            DACL_SECURITY_INFORMATION, GetFileSecurityW, GetTokenInformation,
            PROTECTED_DACL_SECURITY_INFORMATION, PSECURITY_DESCRIPTOR, SetFileSecurityW,
            TOKEN_QUERY, TOKEN_USER, TokenUser,
        },
        System::Threading::{GetCurrentProcess, OpenProcessToken},
    };

    /// Longest security descriptor read back (a private file's is under 200 bytes).
    const MAX_DESCRIPTOR: u32 = 64 * 1024;

    fn wide(s: &OsStr) -> Vec<u16> {
        s.encode_wide().chain(Some(0)).collect()
    }

    /// Reads and frees a string the system allocated with `LocalAlloc`.
    ///
    /// # Safety
    /// `p` is null or a NUL-terminated UTF-16 string from `LocalAlloc`, owned by the caller.
    #[allow(unsafe_code)]
    unsafe fn take_local_string(p: *mut u16) -> Option<String> {
        if p.is_null() {
            return None;
        }
        // SAFETY: as the caller promises, `p` is NUL-terminated.
        let s = unsafe {
            let len = (0..).take_while(|&i| *p.add(i) != 0).count();
            String::from_utf16_lossy(std::slice::from_raw_parts(p, len))
        };
        // SAFETY: `p` came from LocalAlloc and is freed once, here.
        unsafe { LocalFree(p as HLOCAL) };
        Some(s)
    }

    /// The current user's SID as a string (`S-1-5-21-…`).
    #[allow(unsafe_code)]
    pub(crate) fn current_user_sid() -> io::Result<String> {
        // SAFETY: Win32 calls with buffers sized as the API reports; the token handle is
        // closed on every path and the SID string freed by `take_local_string`.
        unsafe {
            let mut token: HANDLE = ptr::null_mut();
            if OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) == 0 {
                return Err(io::Error::last_os_error());
            }
            let mut len = 0u32;
            GetTokenInformation(token, TokenUser, ptr::null_mut(), 0, &mut len);
            // u64 words: TOKEN_USER's pointer needs 8-byte alignment.
            let mut buf = vec![0u64; (len as usize).div_ceil(8).max(1)];
            let ok = GetTokenInformation(token, TokenUser, buf.as_mut_ptr().cast(), len, &mut len);
            let err = io::Error::last_os_error();
            CloseHandle(token);
            if ok == 0 {
                return Err(err);
            }
            let user = &*(buf.as_ptr().cast::<TOKEN_USER>());
            let mut s: *mut u16 = ptr::null_mut();
            if ConvertSidToStringSidW(user.User.Sid, &mut s) == 0 {
                return Err(io::Error::last_os_error());
            }
            take_local_string(s).ok_or_else(|| io::Error::other("no SID string"))
        }
    }

    /// Gives `path` a protected DACL: full access for the current user and SYSTEM only
    /// (`inherit`: also for what is created inside a directory).
    pub(crate) fn restrict(path: &Path, inherit: bool) -> io::Result<()> {
        let flags = if inherit { "OICI" } else { "" };
        let sid = current_user_sid()?;
        set_dacl(
            path,
            &format!("D:P(A;{flags};FA;;;{sid})(A;{flags};FA;;;SY)"),
        )
    }

    /// Replaces the DACL of `path` with the one `sddl` (`D:…`) describes.
    #[allow(unsafe_code)]
    pub(crate) fn set_dacl(path: &Path, sddl: &str) -> io::Result<()> {
        let sddl = wide(OsStr::new(sddl));
        let path = wide(path.as_os_str());
        // SAFETY: NUL-terminated inputs; the descriptor the system allocates is freed
        // once.
        unsafe {
            let mut sd: PSECURITY_DESCRIPTOR = ptr::null_mut();
            if ConvertStringSecurityDescriptorToSecurityDescriptorW(
                sddl.as_ptr(),
                SDDL_REVISION_1,
                &mut sd,
                ptr::null_mut(),
            ) == 0
            {
                return Err(io::Error::last_os_error());
            }
            let ok = SetFileSecurityW(
                path.as_ptr(),
                DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION,
                sd,
            );
            let err = io::Error::last_os_error();
            LocalFree(sd as HLOCAL);
            if ok == 0 {
                return Err(err);
            }
        }
        Ok(())
    }

    /// The DACL of `path` as SDDL (`D:…`).
    #[allow(unsafe_code)]
    fn dacl_sddl(path: &Path) -> io::Result<String> {
        let path = wide(path.as_os_str());
        // SAFETY: buffers sized as the API reports (bounded by MAX_DESCRIPTOR); the string
        // the system allocates is freed by `take_local_string`.
        unsafe {
            let mut len = 0u32;
            GetFileSecurityW(
                path.as_ptr(),
                DACL_SECURITY_INFORMATION,
                ptr::null_mut(),
                0,
                &mut len,
            );
            if len == 0 || len > MAX_DESCRIPTOR {
                return Err(io::Error::last_os_error());
            }
            let mut buf = vec![0u64; (len as usize).div_ceil(8)];
            if GetFileSecurityW(
                path.as_ptr(),
                DACL_SECURITY_INFORMATION,
                buf.as_mut_ptr().cast(),
                len,
                &mut len,
            ) == 0
            {
                return Err(io::Error::last_os_error());
            }
            let mut s: *mut u16 = ptr::null_mut();
            if ConvertSecurityDescriptorToStringSecurityDescriptorW(
                buf.as_mut_ptr().cast(),
                SDDL_REVISION_1,
                DACL_SECURITY_INFORMATION,
                &mut s,
                ptr::null_mut(),
            ) == 0
            {
                return Err(io::Error::last_os_error());
            }
            take_local_string(s).ok_or_else(|| io::Error::other("no SDDL string"))
        }
    }

    /// Who besides the current user (and SYSTEM, administrators) the DACL of `path` lets
    /// in: `None` when no one. A missing DACL lets everyone in.
    pub(crate) fn others_with_access(path: &Path) -> io::Result<Option<String>> {
        let sid = current_user_sid()?;
        Ok(super::others_in_sddl(&dacl_sddl(path)?, &sid))
    }
}

#[cfg(test)]
#[path = "owner_only_tests.rs"]
mod tests;
