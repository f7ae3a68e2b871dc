//! Outgoing datagrams gathered per socket and sent with one `sendmmsg` per batch.
//!
//! Consecutive datagrams of one size to one destination join into one message sent
//! with UDP GSO (`UDP_SEGMENT`): the kernel cuts it into datagrams after routing it
//! once. Without GSO every datagram is its own message, still one syscall per batch.
//! Buffers are kept between flushes, so a steady flow allocates nothing here.

use std::io;
use std::mem::{self, MaybeUninit};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use horde_proto::ChannelId;
use socket2::SockAddr;

/// Messages per `sendmmsg` (each one datagram or one GSO train).
pub const SEND_BATCH: usize = 64;
/// Largest GSO message: the kernel's limit for one UDP send.
const MAX_GSO_BYTES: usize = 65_000;

/// Who a datagram belongs to, so that a refused send reaches its channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    Handshake,
    Channel { conn: u64, channel: ChannelId },
}

/// One message: `len` bytes at `start` of the queue's buffer, cut into datagrams of
/// `segment` bytes (the last may be shorter).
#[derive(Debug, Clone, Copy)]
pub struct Message {
    pub dst: SocketAddr,
    pub owner: Owner,
    start: usize,
    len: usize,
    segment: usize,
}

impl Message {
    pub fn datagrams(&self) -> usize {
        self.len.div_ceil(self.segment)
    }

    /// Bytes on the wire (UDP payload), all segments together.
    pub fn len(&self) -> usize {
        self.len
    }
}

/// What one socket has to send.
#[derive(Default)]
pub struct TxQueue {
    buf: Vec<u8>,
    messages: Vec<Message>,
    /// The last message is closed to more segments (it ended with a short one).
    closed: bool,
}

impl TxQueue {
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    pub fn is_full(&self) -> bool {
        self.messages.len() >= SEND_BATCH
    }

    pub fn clear(&mut self) {
        self.buf.clear();
        self.messages.clear();
        self.closed = false;
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    pub fn bytes(&self, m: &Message) -> &[u8] {
        &self.buf[m.start..m.start + m.len]
    }

    /// Bytes queued, all messages together.
    pub fn buffer_len(&self) -> usize {
        self.buf.len()
    }

    /// Part of the queued bytes, to finish a datagram in place (sealing it).
    pub fn buffer_mut(&mut self, range: std::ops::Range<usize>) -> &mut [u8] {
        &mut self.buf[range]
    }

    /// Queue one datagram; it joins the last message when that goes to the same place
    /// with segments of its size and `max_segments` allows one more.
    pub fn push(&mut self, dst: SocketAddr, owner: Owner, datagram: &[u8], max_segments: usize) {
        let written: Result<(), ()> = self.push_with(dst, owner, max_segments, |buf| {
            buf.extend_from_slice(datagram);
            Ok(())
        });
        debug_assert!(written.is_ok());
    }

    /// Queue the datagram `write` appends to the buffer it is given (e.g. sealing straight
    /// into the batch, without an intermediate copy), as [`TxQueue::push`] would. If
    /// `write` fails, whatever it appended is dropped and nothing is queued.
    pub fn push_with<E>(
        &mut self,
        dst: SocketAddr,
        owner: Owner,
        max_segments: usize,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), E> {
        let start = self.buf.len();
        if let Err(e) = write(&mut self.buf) {
            self.buf.truncate(start);
            return Err(e);
        }
        let n = self.buf.len() - start;
        if let Some(last) = self.messages.last_mut() {
            let joins = !self.closed
                && max_segments > 1
                && last.dst == dst
                && last.owner == owner
                && n <= last.segment
                && last.datagrams() < max_segments
                && last.len + n <= MAX_GSO_BYTES;
            if joins {
                last.len += n;
                self.closed = n < last.segment;
                return Ok(());
            }
        }
        self.messages.push(Message {
            dst,
            owner,
            start,
            len: n,
            segment: n.max(1),
        });
        self.closed = false;
        Ok(())
    }
}

/// Send `messages` (of `queue`) in one `sendmmsg`; returns how many left. An error is
/// the first message's: nothing was sent.
pub fn send_messages(
    socket: &impl AsRawFd,
    queue: &TxQueue,
    messages: &[Message],
) -> io::Result<usize> {
    let count = messages.len().min(SEND_BATCH);
    if count == 0 {
        return Ok(0);
    }
    // Control space for one u16 option, as u64 words for cmsghdr alignment.
    const CTRL_WORDS: usize = 4;
    let mut names: [MaybeUninit<SockAddr>; SEND_BATCH] =
        [const { MaybeUninit::uninit() }; SEND_BATCH];
    // SAFETY: all-zero iovec, mmsghdr and control words are valid values.
    let mut iovs: [libc::iovec; SEND_BATCH] = unsafe { mem::zeroed() };
    let mut hdrs: [libc::mmsghdr; SEND_BATCH] = unsafe { mem::zeroed() };
    let mut ctrls = [[0u64; CTRL_WORDS]; SEND_BATCH];
    for (i, m) in messages[..count].iter().enumerate() {
        let name = names[i].write(SockAddr::from(m.dst));
        let bytes = queue.bytes(m);
        iovs[i] = libc::iovec {
            iov_base: bytes.as_ptr() as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        let h = &mut hdrs[i].msg_hdr;
        h.msg_name = name.as_ptr() as *mut libc::c_void;
        h.msg_namelen = name.len();
        h.msg_iov = &mut iovs[i];
        h.msg_iovlen = 1;
        if m.datagrams() > 1 {
            h.msg_control = ctrls[i].as_mut_ptr() as *mut libc::c_void;
            // SAFETY: CMSG_* only compute sizes and walk the buffer we point at, which
            // holds CMSG_SPACE(2) bytes (24 <= 32).
            unsafe {
                h.msg_controllen = libc::CMSG_SPACE(mem::size_of::<u16>() as u32) as _;
                let c = libc::CMSG_FIRSTHDR(h);
                (*c).cmsg_level = libc::SOL_UDP;
                (*c).cmsg_type = libc::UDP_SEGMENT;
                (*c).cmsg_len = libc::CMSG_LEN(mem::size_of::<u16>() as u32) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u16, m.segment as u16);
            }
        }
    }
    loop {
        // SAFETY: every header points into `names`, `iovs`, `ctrls` and the queue's
        // buffer, all alive and unmoved for the call.
        let n = unsafe { libc::sendmmsg(socket.as_raw_fd(), hdrs.as_mut_ptr(), count as u32, 0) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Send one message's datagrams one by one (the fallback when the device refuses GSO).
pub fn send_singly(
    socket: &impl std::os::fd::AsFd,
    queue: &TxQueue,
    m: &Message,
) -> io::Result<()> {
    let socket = socket2::SockRef::from(socket);
    let to = SockAddr::from(m.dst);
    for d in queue.bytes(m).chunks(m.segment) {
        socket.send_to(d, &to)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Owner = Owner::Channel {
        conn: 1,
        channel: ChannelId::new(0),
    };

    #[test]
    fn equal_datagrams_to_one_place_share_a_message() {
        let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let other: SocketAddr = "127.0.0.1:10".parse().unwrap();
        let mut q = TxQueue::default();
        for _ in 0..3 {
            q.push(to, A, &[1; 100], 64);
        }
        q.push(to, A, &[2; 40], 64); // a short last segment closes the train
        q.push(to, A, &[3; 40], 64);
        q.push(other, A, &[4; 40], 64);
        let sizes: Vec<(usize, usize)> = q
            .messages()
            .iter()
            .map(|m| (m.len, m.datagrams()))
            .collect();
        assert_eq!(sizes, vec![(340, 4), (40, 1), (40, 1)]);
        assert_eq!(&q.bytes(&q.messages()[0])[300..], &[2; 40][..]);
    }

    #[test]
    fn without_gso_every_datagram_is_a_message() {
        let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let mut q = TxQueue::default();
        for _ in 0..5 {
            q.push(to, A, &[1; 100], 1);
        }
        assert_eq!(q.messages().len(), 5);
        q.clear();
        assert!(q.is_empty());
        for _ in 0..100 {
            q.push(to, A, &[1; 1000], 64);
        }
        // 65 000 bytes at most per message.
        assert_eq!(
            q.messages()
                .iter()
                .map(|m| m.datagrams())
                .collect::<Vec<_>>(),
            vec![64, 36]
        );
    }

    #[test]
    fn a_batch_leaves_in_one_call_and_arrives_whole() {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = rx.local_addr().unwrap();
        let mut q = TxQueue::default();
        for i in 0..10u8 {
            q.push(to, A, &[i; 300], 1);
        }
        assert_eq!(send_messages(&tx, &q, q.messages()).unwrap(), 10);
        let mut buf = [0u8; 2048];
        for i in 0..10u8 {
            let n = rx.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], &[i; 300][..]);
        }
    }

    #[test]
    fn written_in_place_datagrams_join_and_a_failed_write_leaves_nothing() {
        let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let mut q = TxQueue::default();
        let write = |byte: u8, n: usize| {
            move |buf: &mut Vec<u8>| -> Result<(), &str> {
                buf.resize(buf.len() + n, byte);
                Ok(())
            }
        };
        q.push_with(to, A, 64, write(1, 100)).unwrap();
        q.push_with(to, A, 64, write(2, 100)).unwrap();
        // Half written, then refused: neither the bytes nor a message stay.
        let refused = q.push_with(to, A, 64, |buf: &mut Vec<u8>| {
            buf.extend_from_slice(&[9; 50]);
            Err("refused")
        });
        assert_eq!(refused, Err("refused"));
        q.push_with(to, A, 64, write(3, 40)).unwrap();
        let sizes: Vec<(usize, usize)> = q
            .messages()
            .iter()
            .map(|m| (m.len, m.datagrams()))
            .collect();
        assert_eq!(sizes, vec![(240, 3)]);
        let bytes = q.bytes(&q.messages()[0]);
        assert!(!bytes.contains(&9));
        assert_eq!(&bytes[100..200], &[2; 100][..]);
        assert_eq!(&bytes[200..], &[3; 40][..]);
    }
}
