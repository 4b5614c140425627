"""The vision models' configs (issues 33, 34), shared by the vision suites: vision-parity (correctness against the
bench/reference oracles) and vision (speed against PyTorch). Plain Python, no torch: the configs are JSON dicts in the
production formats (HF's config.json for YOLOv10 / ConvNeXt-V2, diffusers' for FLUX.1's transformer and VAE)."""


def model_configs(tiny=False, flux_size=1024, flux_layers='2,2', batch=2):
    """{name: (config.json dict, input spec)} of the five vision models: FLUX.1-dev's transformer (the first D double +
    S single blocks of flux_layers 'D,S') and VAE, YOLOv10 n / s at 640 (COCO's 80 classes), ConvNeXt-V2-base at 224
    (ImageNet-1k head); tiny: the CI fixtures' tiny shapes instead. The spec of YOLO / ConvNeXt is the pixel tensor's
    shape at `batch`; FLUX's: the image side, the T5 length and the VAE's downscale."""
    L, S = (int(x) for x in flux_layers.split(','))
    if tiny:
        yolo = lambda scale: ({'architectures': ['YOLOv10ForObjectDetection'], 'model_type': 'yolov10', 'scale': scale, 'nc': 4, 'width_multiple': 0.125,
                               'max_det': 20, 'imgsz': 64, 'torch_dtype': 'float32'}, [batch, 3, 64, 64])
        convnext = ({'architectures': ['ConvNextV2ForImageClassification'], 'model_type': 'convnextv2', 'num_channels': 3, 'patch_size': 4, 'num_stages': 2,
                     'hidden_sizes': [8, 16], 'depths': [2, 1], 'hidden_act': 'gelu', 'layer_norm_eps': 1e-12, 'image_size': 32,
                     'id2label': {str(i): f'c{i}' for i in range(5)}, 'label2id': {f'c{i}': i for i in range(5)}, 'torch_dtype': 'float32'}, [batch, 3, 32, 32])
        flux = {'_class_name': 'FluxTransformer2DModel', 'attention_head_dim': 16, 'axes_dims_rope': [4, 6, 6], 'guidance_embeds': True, 'in_channels': 64,
                'joint_attention_dim': 32, 'num_attention_heads': 2, 'num_layers': L, 'num_single_layers': S, 'patch_size': 1, 'pooled_projection_dim': 32}
        vae = {'_class_name': 'AutoencoderKL', 'act_fn': 'silu', 'block_out_channels': [8, 16], 'in_channels': 3, 'latent_channels': 16, 'layers_per_block': 1,
               'mid_block_add_attention': True, 'norm_num_groups': 4, 'out_channels': 3, 'sample_size': 16, 'scaling_factor': 0.3611, 'shift_factor': 0.1159,
               'up_block_types': ['UpDecoderBlock2D'] * 2, 'use_post_quant_conv': False, 'use_quant_conv': False}
        size, t5_len, vae_scale = 32, 8, 2
    else:
        yolo = lambda scale: ({'architectures': ['YOLOv10ForObjectDetection'], 'model_type': 'yolov10', 'scale': scale, 'nc': 80, 'max_det': 300,
                               'imgsz': 640, 'torch_dtype': 'float32'}, [batch, 3, 640, 640])
        convnext = ({'architectures': ['ConvNextV2ForImageClassification'], 'model_type': 'convnextv2', 'num_channels': 3, 'patch_size': 4, 'num_stages': 4,
                     'hidden_sizes': [128, 256, 512, 1024], 'depths': [3, 3, 27, 3], 'hidden_act': 'gelu', 'layer_norm_eps': 1e-12, 'image_size': 224,
                     'id2label': {str(i): f'class_{i}' for i in range(1000)}, 'label2id': {f'class_{i}': i for i in range(1000)},
                     'torch_dtype': 'float32'}, [batch, 3, 224, 224])
        flux = {'_class_name': 'FluxTransformer2DModel', 'attention_head_dim': 128, 'axes_dims_rope': [16, 56, 56], 'guidance_embeds': True, 'in_channels': 64,
                'joint_attention_dim': 4096, 'num_attention_heads': 24, 'num_layers': L, 'num_single_layers': S, 'patch_size': 1, 'pooled_projection_dim': 768}
        vae = {'_class_name': 'AutoencoderKL', 'act_fn': 'silu', 'block_out_channels': [128, 256, 512, 512], 'in_channels': 3, 'latent_channels': 16,
               'layers_per_block': 2, 'mid_block_add_attention': True, 'norm_num_groups': 32, 'out_channels': 3, 'sample_size': 1024, 'scaling_factor': 0.3611,
               'shift_factor': 0.1159, 'up_block_types': ['UpDecoderBlock2D'] * 4, 'use_post_quant_conv': False, 'use_quant_conv': False}
        size, t5_len, vae_scale = flux_size, 512, 8
    return {'yolov10n': yolo('n'), 'yolov10s': yolo('s'), 'convnextv2_base': convnext,
            'flux_transformer': (flux, {'size': size, 't5_len': t5_len, 'vae_scale': vae_scale}),
            'flux_vae': (vae, {'size': size, 'vae_scale': vae_scale})}
