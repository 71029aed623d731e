//! The inbound side of a kept stream, over an in-memory pipe: answers in request
//! order, at most [`PIPELINE`] requests read ahead of the answers, and a malformed or
//! oversized item ends the stream. The outbound side: every request it took is
//! answered or reported, however the stream ends.

use std::time::Duration;

use futures::{AsyncReadExt as _, AsyncWriteExt as _};
use interlink_core::wire::{DeliverRequest, DeliverResponse, VERSION};
use libp2p::PeerId;
use serde_bytes::ByteBuf;
use tokio::sync::mpsc;
use tokio_util::{compat::TokioAsyncReadCompatExt as _, sync::CancellationToken};

use super::{
    LiveEvent, Lost, MAX_REQUEST_BYTES, PIPELINE, Streams, drive_outbound, encoded_len_bound, serve,
};
use crate::cbor::{ItemReader, write_item};

fn request(n: u8) -> DeliverRequest {
    DeliverRequest {
        v: VERSION,
        envelopes: vec![ByteBuf::from(vec![n; 8])],
    }
}

fn response(n: u8) -> DeliverResponse {
    DeliverResponse {
        v: VERSION,
        receipt: Some(ByteBuf::from(vec![n])),
        results: Vec::new(),
    }
}

#[tokio::test]
async fn answers_go_out_in_request_order_and_reading_stops_a_pipeline_ahead() {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (events_tx, mut events) = mpsc::channel(64);
    let peer = PeerId::random();
    let server = tokio::spawn(serve(peer, theirs.compat(), events_tx));
    let (mut rd, mut wr) = ours.compat().split();
    let mut answers = ItemReader::default();
    for n in 0..(PIPELINE as u8 + 2) {
        write_item(&mut wr, request(n)).await.unwrap();
    }
    // Only a pipeline's worth is read while none is answered.
    let mut asked = Vec::new();
    for _ in 0..PIPELINE {
        match tokio::time::timeout(Duration::from_secs(5), events.recv()).await {
            Ok(Some(LiveEvent::Request {
                request, answer, ..
            })) => {
                asked.push((request.envelopes[0][0], answer));
            }
            other => panic!("expected a request, got {other:?}"),
        }
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(200), events.recv())
            .await
            .is_err(),
        "read more than {PIPELINE} requests ahead of the answers"
    );
    // Answered out of order; written in order.
    while let Some((n, answer)) = asked.pop() {
        answer.send(response(n)).unwrap();
    }
    for n in 0..PIPELINE as u8 {
        let got: DeliverResponse = answers.next(&mut rd, 1 << 16).await.unwrap();
        assert_eq!(got.receipt.unwrap()[0], n);
    }
    // The rest comes now that room was made.
    for expected in PIPELINE as u8..PIPELINE as u8 + 2 {
        match tokio::time::timeout(Duration::from_secs(5), events.recv()).await {
            Ok(Some(LiveEvent::Request {
                request, answer, ..
            })) => {
                assert_eq!(request.envelopes[0][0], expected);
                answer.send(response(expected)).unwrap();
            }
            other => panic!("expected a request, got {other:?}"),
        }
        let got: DeliverResponse = answers.next(&mut rd, 1 << 16).await.unwrap();
        assert_eq!(got.receipt.unwrap()[0], expected);
    }
    // The sender's close ends the stream.
    wr.close().await.unwrap();
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .unwrap()
            .unwrap(),
        peer
    );
}

#[tokio::test]
async fn a_request_answered_after_the_sender_closed_still_goes_out() {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (events_tx, mut events) = mpsc::channel(64);
    let server = tokio::spawn(serve(PeerId::random(), theirs.compat(), events_tx));
    let (mut rd, mut wr) = ours.compat().split();
    let mut answers = ItemReader::default();
    write_item(&mut wr, request(1)).await.unwrap();
    wr.close().await.unwrap();
    let Some(LiveEvent::Request { answer, .. }) = events.recv().await else {
        panic!("no request");
    };
    answer.send(response(1)).unwrap();
    let got: DeliverResponse = answers.next(&mut rd, 1 << 16).await.unwrap();
    assert_eq!(got.receipt.unwrap()[0], 1);
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn garbage_or_an_oversized_item_ends_the_stream_unanswered() {
    // A byte string announced at 2 MiB, sent in full: more than one request may be.
    let oversized = [
        vec![0x5a],
        (2_u32 << 20).to_be_bytes().to_vec(),
        vec![0; 2 << 20],
    ]
    .concat();
    // A well-formed request larger than a kept stream takes (it goes on `deliver`).
    let too_large = cbor4ii::serde::to_vec(
        Vec::new(),
        &DeliverRequest {
            v: VERSION,
            envelopes: vec![ByteBuf::from(vec![7; 70 * 1024]); 2],
        },
    )
    .unwrap();
    assert!(too_large.len() > MAX_REQUEST_BYTES);
    for bad in [vec![0xff_u8; 64], oversized, too_large] {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (events_tx, mut events) = mpsc::channel(64);
        let server = tokio::spawn(serve(PeerId::random(), theirs.compat(), events_tx));
        let (mut rd, mut wr) = ours.compat().split();
        // The server stops reading part-way: the rest of the write fails.
        let writing = tokio::spawn(async move {
            let _ = wr.write_all(&bad).await;
            wr
        });
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .expect("the stream did not end")
            .unwrap();
        assert!(events.try_recv().is_err(), "a bad item reached the node");
        let mut rest = Vec::new();
        rd.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "a bad item was answered");
        drop(writing);
    }
}

#[tokio::test]
async fn a_request_the_node_drops_unanswered_ends_the_stream() {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (events_tx, mut events) = mpsc::channel(64);
    let server = tokio::spawn(serve(PeerId::random(), theirs.compat(), events_tx));
    let (_rd, mut wr) = ours.compat().split();
    write_item(&mut wr, request(1)).await.unwrap();
    let Some(LiveEvent::Request { answer, .. }) = events.recv().await else {
        panic!("no request");
    };
    drop(answer);
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the stream did not end")
        .unwrap();
}

#[test]
fn the_length_bound_is_never_below_the_encoding() {
    for sizes in [
        vec![],
        vec![0],
        vec![23, 24, 255, 256],
        vec![65_535, 65_536],
        vec![1; 64],
    ] {
        let request = DeliverRequest {
            v: VERSION,
            envelopes: sizes.iter().map(|n| ByteBuf::from(vec![1; *n])).collect(),
        };
        let bytes = cbor4ii::serde::to_vec(Vec::new(), &request).unwrap();
        assert!(encoded_len_bound(&request) >= bytes.len(), "{sizes:?}");
    }
}

#[tokio::test]
async fn a_request_larger_than_a_kept_stream_takes_is_given_back_to_go_as_a_request() {
    let control = libp2p_stream::Behaviour::new().new_control();
    let protocol = libp2p::StreamProtocol::new("/interlink-p2p/test/deliver-stream/10");
    let mut streams = Streams::new(control, protocol, false);
    let peer = PeerId::random();
    let large = DeliverRequest {
        v: VERSION,
        envelopes: vec![ByteBuf::from(vec![7; 70 * 1024]); 2],
    };
    assert_eq!(streams.send(peer, large.clone()), Err(large));
    assert!(streams.send(peer, request(1)).is_ok());
}

/// The node closes a healthy stream's queue (it did so whenever any connection to the
/// peer closed): the request already written is still answered on it. Its answer was
/// dropped unreported, the engine's window ran out, and the peer — connected all along
/// — was marked unreachable: the rest of a burst went `queued` (issue 51).
#[tokio::test]
async fn a_request_written_before_the_queue_closed_is_still_answered() {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (events_tx, mut events) = mpsc::channel(64);
    let (requests_tx, requests) = mpsc::channel(PIPELINE);
    let peer = PeerId::random();
    let task = tokio::spawn(drive_outbound(
        peer,
        ours.compat(),
        requests,
        events_tx,
        CancellationToken::new(),
    ));
    let (mut rd, mut wr) = theirs.compat().split();
    let mut asked = ItemReader::default();
    requests_tx.send((7, request(7))).await.unwrap();
    let got: DeliverRequest = asked.next(&mut rd, 1 << 16).await.unwrap();
    assert_eq!(got.envelopes[0][0], 7);
    // The queue closes while the request waits for its answer.
    drop(requests_tx);
    tokio::time::sleep(Duration::from_millis(50)).await;
    write_item(&mut wr, response(7)).await.unwrap();
    match tokio::time::timeout(Duration::from_secs(5), events.recv()).await {
        Ok(Some(LiveEvent::Answered {
            id: 7,
            result: Ok(r),
            ..
        })) => assert_eq!(r.receipt.unwrap()[0], 7),
        other => panic!("expected the answer, got {other:?}"),
    }
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
}

/// The node resets a stream whose connection may be closing (a circuit retired for a
/// direct connection: its stream is abandoned, not failed, and no answer would come):
/// the request written on it is reported lost at once, not after the stream's timeout.
/// It was found so in the two-NAT lab: sent ~80 ms before the circuits closed, it went
/// `queued` although the peer stayed connected.
#[tokio::test]
async fn a_reset_stream_reports_what_it_took_lost_at_once() {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (events_tx, mut events) = mpsc::channel(64);
    let (requests_tx, requests) = mpsc::channel(PIPELINE);
    let reset = CancellationToken::new();
    let task = tokio::spawn(drive_outbound(
        PeerId::random(),
        ours.compat(),
        requests,
        events_tx,
        reset.clone(),
    ));
    let (mut rd, _wr) = theirs.compat().split();
    let mut asked = ItemReader::default();
    requests_tx.send((3, request(3))).await.unwrap();
    let _: DeliverRequest = asked.next(&mut rd, 1 << 16).await.unwrap();
    // No answer comes (the other end keeps the stream open and silent).
    reset.cancel();
    match tokio::time::timeout(Duration::from_secs(2), events.recv()).await {
        Ok(Some(LiveEvent::Answered {
            id: 3,
            result: Err(Lost::Stream),
            ..
        })) => {}
        other => panic!("expected the request reported lost, got {other:?}"),
    }
    tokio::time::timeout(Duration::from_secs(2), task)
        .await
        .unwrap()
        .unwrap();
}

/// A stream that breaks under requests reports each of them lost, in order: none is
/// left for the engine's timeout to find.
#[tokio::test]
async fn every_request_on_a_stream_that_breaks_is_reported_lost() {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (events_tx, mut events) = mpsc::channel(64);
    let (requests_tx, requests) = mpsc::channel(PIPELINE);
    let task = tokio::spawn(drive_outbound(
        PeerId::random(),
        ours.compat(),
        requests,
        events_tx,
        CancellationToken::new(),
    ));
    let (mut rd, mut wr) = theirs.compat().split();
    let mut asked = ItemReader::default();
    for n in 1..=3 {
        requests_tx.send((n, request(n as u8))).await.unwrap();
    }
    // The first is answered, then the stream breaks under the other two.
    let _: DeliverRequest = asked.next(&mut rd, 1 << 16).await.unwrap();
    write_item(&mut wr, response(1)).await.unwrap();
    for _ in 2..=3 {
        let _: DeliverRequest = asked.next(&mut rd, 1 << 16).await.unwrap();
    }
    drop((rd, wr));
    let mut seen = Vec::new();
    while seen.len() < 3 {
        match tokio::time::timeout(Duration::from_secs(5), events.recv()).await {
            Ok(Some(LiveEvent::Answered { id, result, .. })) => {
                seen.push((id, result.map(|_| ()).map_err(|e| e == Lost::Stream)));
            }
            other => panic!("expected an answer or a loss, got {other:?}"),
        }
    }
    assert_eq!(seen, vec![(1, Ok(())), (2, Err(true)), (3, Err(true))]);
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
}
