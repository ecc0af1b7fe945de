use vips_sdk::*;
#[test]
fn smoke() {
    let p = Provider::open_by_name("cpu").unwrap();
    println!("{:?} {:?}", p.info(), p.devices().unwrap());
    let d = p.device(0).unwrap();
    let x = d.upload(&HostTensor::from_vec(&[2, 3], vec![1.0f32, -2.0, 3.0, 0.5, 0.0, 7.0]).unwrap()).unwrap();
    let y = d.execute("vsdk.gelu", 1, &Attrs::new(), &[&x]).unwrap();
    println!("{:?}", d.download(&y[0]).unwrap().to_vec::<f32>().unwrap());
}
