use futures::io::Cursor;

use super::*;

/// A reader that hands out its bytes in the given pieces (or what of one fits the
/// read), then pends forever: a stream whose writer has not closed it yet.
struct Pieces(Vec<Vec<u8>>);

impl AsyncRead for Pieces {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        out: &mut [u8],
    ) -> std::task::Poll<io::Result<usize>> {
        if self.0.is_empty() {
            return std::task::Poll::Pending;
        }
        let piece = &mut self.0[0];
        let n = piece.len().min(out.len());
        out[..n].copy_from_slice(&piece[..n]);
        piece.drain(..n);
        if piece.is_empty() {
            self.0.remove(0);
        }
        std::task::Poll::Ready(Ok(n))
    }
}

fn encoded(value: &(String, Vec<u32>)) -> Vec<u8> {
    cbor4ii::serde::to_vec(Vec::new(), value).unwrap()
}

#[tokio::test]
async fn a_message_is_taken_before_the_writer_closes() {
    let value = ("hello".to_owned(), (0..100).collect::<Vec<u32>>());
    let bytes = encoded(&value);
    let (a, b) = bytes.split_at(7);
    let mut stream = Pieces(vec![a.to_vec(), b.to_vec()]);
    let read: (String, Vec<u32>) = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        read_item(&mut stream, 1024),
    )
    .await
    .expect("decoded without the end of the stream")
    .unwrap();
    assert_eq!(read, value);
}

#[tokio::test]
async fn a_message_over_the_limit_is_refused() {
    let value = ("x".repeat(2000), vec![]);
    let mut stream = Cursor::new(encoded(&value));
    let err = read_item::<(String, Vec<u32>), _>(&mut stream, 1024)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    assert!(err.to_string().contains("larger than 1024"), "{err}");
}

#[tokio::test]
async fn a_message_cut_short_or_malformed_is_an_error() {
    let bytes = encoded(&("hello".to_owned(), vec![1, 2, 3]));
    let mut short = Cursor::new(bytes[..bytes.len() - 1].to_vec());
    let err = read_item::<(String, Vec<u32>), _>(&mut short, 1024)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    let mut empty = Cursor::new(Vec::new());
    let err = read_item::<(String, Vec<u32>), _>(&mut empty, 1024)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no message"), "{err}");
    let mut garbage = Cursor::new(vec![0xff, 0, 0]);
    let err = read_item::<(String, Vec<u32>), _>(&mut garbage, 1024)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    // Well-formed CBOR of another shape.
    let mut other = Cursor::new(cbor4ii::serde::to_vec(Vec::new(), &7u8).unwrap());
    let err = read_item::<(String, Vec<u32>), _>(&mut other, 1024)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
}

#[tokio::test]
async fn what_follows_the_message_is_not_read() {
    let value = ("a".to_owned(), vec![9]);
    let mut bytes = encoded(&value);
    bytes.extend_from_slice(&[0xff; 16]);
    let mut stream = Cursor::new(bytes);
    let read: (String, Vec<u32>) = read_item(&mut stream, 1024).await.unwrap();
    assert_eq!(read, value);
}

#[tokio::test]
async fn a_large_message_arrives_in_many_reads() {
    let value = ("y".repeat(300_000), (0..1000).collect::<Vec<u32>>());
    let bytes = encoded(&value);
    let mut stream = Pieces(bytes.chunks(1000).map(<[u8]>::to_vec).collect());
    let read: (String, Vec<u32>) = read_item(&mut stream, 1 << 20).await.unwrap();
    assert_eq!(read, value);
}
